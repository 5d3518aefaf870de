"""What a run does differently with ``--thinking on`` (settings/thinking.py): the chat template's ``enable_thinking``
switch, the trace's token count, and budget forcing (``--max-thinking-tokens N``; docs/settings.md, reasoning models).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any, Callable, Sequence

from ..api import GenRequest
from ..backend_support.tokenization import render_chat
from ..settings.thinking import DEFAULT_TRACE_BUDGET, TEMPLATE_SWITCH, ClosedTrace, Thinking, takes_thinking


def template_source(backend: Any) -> str | None:
    """The source of the backend's local chat template (None: none here, e.g. a server's)."""
    template = getattr(backend.tokenizer, "chat_template", None)
    return template if isinstance(template, str) else None


def thinking_chat(backend: Any, thinking: Thinking, echo: Callable[[str], None]) -> Callable[[list[dict]], str]:
    """The renderer of chat prompts: the template's ``enable_thinking`` switch set where the template reads it; one line
    when thinking is on and the template has no such switch."""
    if takes_thinking(template_source(backend)):
        name = getattr(backend, "name_or_path", "")  # a replicas' front has none (the name only labels an error)
        return partial(render_chat, backend.tokenizer, name, **{TEMPLATE_SWITCH: thinking.on})
    if thinking.on:
        echo(f"note: the chat template takes no {TEMPLATE_SWITCH} switch: the prompts are rendered as without "
             "--thinking on (a model that always thinks still has its trace kept apart)")
    return backend.apply_chat_template


def refuse_thinking_without_traces(backend: Any, spec: Any) -> None:
    """--thinking on where the prompts are rendered here, with a chat template that has no switch and a tokenizer
    without the trace's markers: nothing asks the model to think nor shows that it writes a trace (issue 47); one
    line, unless --think-markers was given (set on the ``RunSpec``, not its default)."""
    tokenizer = backend.tokenizer
    if (not spec.thinking or "think_markers" in spec.model_fields_set or backend.capabilities.chat_messages
            or tokenizer is None or takes_thinking(template_source(backend))):
        return
    if not set(spec.think_markers) <= set(getattr(tokenizer, "get_vocab", dict)()):
        markers = "/".join(spec.think_markers)
        raise ValueError(f"--thinking on: the model's chat template has no {TEMPLATE_SWITCH} switch and its tokenizer "
                         f"no {markers} tokens: it is neither asked to think nor known to write a trace; run with "
                         "--thinking off, or give --think-markers START,END if it writes one")


def budget_line(max_thinking_tokens: int | None) -> str:
    """The plan's line on the trace budget (forcing sends each item twice: the trace, then the answer after it)."""
    if max_thinking_tokens is None:
        return (f"thinking: each trace may take {DEFAULT_TRACE_BUDGET:,} tokens on top of the answer's (the default); "
                "--max-thinking-tokens N closes it at N instead")
    return (f"thinking: each trace closed at {max_thinking_tokens:,} tokens (--max-thinking-tokens), then the answer "
            "generated after it: two requests per item")


def forced_values(cached: Callable[[Sequence[GenRequest]], tuple[list[Any], int]], requests: Sequence[GenRequest],
                  thinking: Thinking) -> tuple[list[str], int]:
    """Each request's reply as trace, end marker and answer (a ``ClosedTrace``), by budget forcing (docs/settings.md);
    ``cached(requests)``: the runner's resume-cached generation, (values, computed). The trace is generated without stop
    strings: whether the model wrote the end marker is read from the text (the answer after it is generated again)."""
    end = thinking.markers[1]
    firsts, computed = cached([replace(r, stop=(), max_new_tokens=thinking.trace_budget, constraint=None)
                               for r in requests])
    traces = [t.split(end, 1)[0] for t in firsts]
    answers, more = cached([replace(r, context=r.context + t + end) for r, t in zip(requests, traces)])
    return [ClosedTrace(t + end + a, forced=end not in f) for t, a, f in zip(traces, answers, firsts)], computed + more

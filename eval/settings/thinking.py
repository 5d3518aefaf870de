"""Reasoning models (``--thinking on|off``): the trace kept apart from the answer, which is what follows the *last*
end marker of the reply (docs/settings.md, "Reasoning models and the study's text metrics")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

DEFAULT_MARKERS = ("<think>", "</think>")
# A thinking run without --max-thinking-tokens may write this many tokens of trace on top of the
# task's answer budget (a CE letter's 16 tokens would never hold a trace): a short task's trace, and
# about a minute a request for a small model on a CPU (issue 47); longer ones with --max-thinking-tokens.
DEFAULT_TRACE_BUDGET = 1024
UNFINISHED = "reasoning_unfinished"  # the unparsed reason of a reply whose trace never ends
TEMPLATE_SWITCH = "enable_thinking"  # the chat templates' variable (Qwen3 and its kin)


@dataclass(frozen=True)
class Thinking:
    """A run's thinking options: on or off, the trace's markers, and the budget of the trace
    (``max_tokens``: --max-thinking-tokens, forced closed when reached; None: the default budget, never forced)."""

    on: bool = False
    markers: tuple[str, str] = DEFAULT_MARKERS
    max_tokens: int | None = None

    @property
    def trace_budget(self) -> int:
        return self.max_tokens if self.max_tokens is not None else DEFAULT_TRACE_BUDGET


def parse_markers(value: str | Sequence[str]) -> tuple[str, str]:
    """``--think-markers START,END`` (or the two as a list) -> (START, END); a ValueError naming what was expected.
    Neither marker may hold the other: an end read as a start (or the reverse) would credit the trace."""
    parts = value.split(",") if isinstance(value, str) else list(value)
    if len(parts) != 2 or not all(isinstance(p, str) and p.strip() for p in parts):
        raise ValueError(f"--think-markers {str(value)[:80]!r}: expected START,END, two non-empty markers separated by "
                         "one comma (e.g. <think>,</think>)")
    start, end = parts[0].strip(), parts[1].strip()
    if start in end or end in start:
        raise ValueError(f"--think-markers {start},{end}: the start and end markers must differ, neither inside the "
                         "other (e.g. <think>,</think>)")
    return start, end


class Trace(NamedTuple):
    reasoning: str | None  # the trace's text, markers excluded; None: the reply has no trace
    answer: str  # what follows the trace (the reply, when it has none; "" when the trace never ends)
    finished: bool  # False: the trace never ends


def split_trace(text: str, markers: Sequence[str] = DEFAULT_MARKERS, prompt_opens: bool = False) -> Trace:
    """The reply's trace and its answer (module docstring)."""
    start, end = markers
    trace, closed, answer = text.rpartition(end)
    if start in answer:  # a trace opened after the last end marker (or never closed): it never ends
        return Trace(text.split(start, 1)[1].strip(), "", False)
    if closed:
        return Trace(trace.split(start, 1)[-1].strip(), answer.strip(), True)
    if prompt_opens:
        return Trace(text.strip(), "", False)
    return Trace(None, text, True)


def prompt_opens_trace(prompt: str, markers: Sequence[str]) -> bool:
    """Whether the prompt ends inside an open trace (a template that writes the start marker itself)."""
    return prompt.rstrip().endswith(markers[0])


def takes_thinking(template: str | None) -> bool:
    """Whether a chat template's source reads the ``enable_thinking`` switch."""
    return isinstance(template, str) and TEMPLATE_SWITCH in template


class ClosedTrace(str):
    """A reply made by budget forcing (running/thinking_run.py): ``forced`` when the evaluator, not the
    model, closed its trace (the model wrote no end marker within --max-thinking-tokens)."""

    forced: bool

    def __new__(cls, text: str, forced: bool) -> "ClosedTrace":
        reply = super().__new__(cls, text)
        reply.forced = forced
        return reply


def trace_fields(trace: Trace, count_tokens: Callable[[str], int] | None, reply: str) -> dict[str, Any]:
    """A sample's record of its trace: the text, its tokens (by the backend's tokenizer; None: none here),
    whether the evaluator closed it (``reply`` a forced ``ClosedTrace``) and whether it ended."""
    tokens = count_tokens(trace.reasoning) if trace.reasoning is not None and count_tokens is not None else None
    return {"reasoning": trace.reasoning, "reasoning_tokens": tokens,
            "reasoning_forced": bool(getattr(reply, "forced", False)),
            "reasoning_unfinished": not trace.finished}


def trace_summary(samples: Sequence[dict]) -> dict[str, float] | None:
    """Per prompt: the mean trace length in tokens (over the traces counted), how many traces were
    forced closed and how many never ended; None when no sample records a trace field."""
    if not any("reasoning" in s for s in samples):
        return None
    counted = [s["reasoning_tokens"] for s in samples if s.get("reasoning_tokens") is not None]
    return {"traces": sum(s.get("reasoning") is not None for s in samples),
            "mean_trace_tokens": round(sum(counted) / len(counted), 1) if counted else None,
            "forced": sum(bool(s.get("reasoning_forced")) for s in samples),
            "unfinished": sum(bool(s.get("reasoning_unfinished")) for s in samples)}

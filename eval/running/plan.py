"""The run as one plan, built once before the first request (``Runner.plan``): the entries it evaluates (and why the
others are not), per entry its documents, prompts and requests, which of those the resume cache already holds, and the
work left. The CLI prints it (``estimate.announce``) and hands the same plan to ``Runner.run``: never computed twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..api import GenRequest, LLRequest, RequestKind
from ..sources.entries import TaskEntry
from .estimate import LL, TaskPlan, TokenCounter, scoring_work
from .selection import Selection
from .task_kinds import TaskKind


@dataclass
class PromptPlan:
    """One prompt of an entry: the prompt of every document and the requests they send."""

    name: str
    contexts: list[str]
    kind: RequestKind  # the backend method called
    requests: list[LLRequest] | list[GenRequest]
    cached: list[bool]  # per request: the resume cache holds it (read back, not computed)


@dataclass
class EntryPlan:
    """One task entry as this run asks it: its kind, its documents and its prompts."""

    entry: TaskEntry
    asked: TaskKind  # how the run asks it (running/task_kinds.py)
    docs: list[dict]
    prompts: list[PromptPlan]

    @property
    def name(self) -> str:
        return self.entry.name

    def work(self, count: TokenCounter) -> TaskPlan:
        """The entry's requests, tokens read and new-token budget, and what the cache already holds."""
        kind = self.asked.request_kind
        plan, left = TaskPlan(self.name, kind, 0, 0, counted=count.tokenizer is not None), []
        # Budget forcing sends each request twice: its trace, then the answer after it (running/thinking_run.py).
        sent, trace_budget = (2, self.asked.thinking.trace_budget) if self.asked.forcing else (1, 0)
        for prompt in self.prompts:
            for request, cached in zip(prompt.requests, prompt.cached):
                texts = (request.context, request.continuation) if kind == LL else (request.context,)  # type: ignore
                tokens = sum(count(x) for x in texts)
                plan.requests += sent
                plan.prompt_tokens += tokens * sent
                budget = 0 if kind == LL else request.max_new_tokens  # type: ignore[union-attr]
                plan.max_new_tokens = max(plan.max_new_tokens, trace_budget, budget)
                if cached:
                    plan.cached += 1
                    plan.cached_tokens += tokens
                else:
                    left.append(request)
        if kind == LL:  # what the time estimate prices: the forward rows left and their tokens
            plan.rows, plan.row_tokens = scoring_work(left, count, set())
        return plan


@dataclass
class RunPlan:
    """What one invocation evaluates: ``asked`` (the entries, in order, that the setting can ask),
    ``entries`` (those of them with data: planned), and ``selection`` (why the others are not run)."""

    selection: Selection
    asked: list[TaskEntry]
    entries: dict[str, EntryPlan] = field(default_factory=dict)
    _counter: TokenCounter | None = field(default=None, repr=False)

    def token_counter(self, tokenizer: Any | None) -> TokenCounter:
        """One counter per plan: the plan's count and the stream's time split encode each text once."""
        if self._counter is None or self._counter.tokenizer is not tokenizer:
            self._counter = TokenCounter(tokenizer)
        return self._counter

    def work(self, tokenizer: Any | None) -> list[TaskPlan]:
        """Per planned entry, the work it sends and what the cache holds (tokens counted with
        ``tokenizer``, else estimated from characters)."""
        count = self.token_counter(tokenizer)
        return [e.work(count) for e in self.entries.values()]


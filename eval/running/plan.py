"""The run as one plan, built once before the first request (``Runner.plan``), printed (``estimate.announce``) and
executed (``Runner.run``), never computed twice: docs/evaluator.md. ``select`` decides once, for the CLI (before the
model loads), the plan and the runner, which entries a run evaluates: one the ``--setting`` cannot ask (no instruct
prompts) or, over every task (``skip_missing``), whose split the data lack is left out; named, either is an error."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..api import GenRequest, LLRequest, RequestKind
from ..sources.base import Source
from ..sources.entries import TaskEntry
from .estimate import LL, TaskPlan, TokenCounter, scoring_work
from .task_kinds import TaskKind, task_kind


def eval_split(entry: TaskEntry, config: Any) -> str:
    """The split evaluated: --split, else the task's official evaluation split."""
    return config.split or entry.spec.eval_split


@dataclass
class Selection:
    runnable: list[TaskEntry]
    # entry -> why it is not evaluated: no instruct prompts for the setting / no such split in the data
    unaskable: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


def select(entries: Sequence[TaskEntry], source: Source, config: Any) -> Selection:
    """The entries the run evaluates and why the others are not (the module docstring)."""
    # Multiple-choice entries that a generative setting cannot ask: they declare no ``TaskSpec.instruct``.
    unaskable = [e for e in entries if not task_kind(e, config.setting).askable]
    if unaskable and not config.skip_missing:
        raise ValueError(f"--setting {config.setting} needs the instruct prompts (TaskSpec.instruct) that "
                         f"{', '.join(e.name for e in unaskable)} do(es) not declare")
    out = Selection([], {e.name: f"the task declares no instruct prompts for --setting {config.setting}"
                         for e in unaskable})
    for entry in entries:
        if entry in unaskable:
            continue
        if config.skip_missing and not source.has_split(entry, eval_split(entry, config)):
            out.missing[entry.name] = source.why_missing(entry, eval_split(entry, config))
        else:
            out.runnable.append(entry)
    return out


def nothing_evaluated(skipped: dict[str, str], source: Source) -> str:
    """The one-line error of a run that evaluated nothing (the reasons per task are printed before it); a local
    folder's task folders that no registered task reads are named."""
    text = (f"nothing was evaluated: every one of the {len(skipped)} task entries was skipped "
            f"({'; '.join(sorted(set(skipped.values())))[:300]})")
    folder = source.folder
    if folder is not None and Path(folder).is_dir():
        from evalita_data.registry import task_ids

        known = set(task_ids())
        unknown = sorted(p.name for p in Path(folder).iterdir()
                         if p.is_dir() and not p.name.startswith(".") and p.name not in known)
        if unknown:
            text += (f"; {folder} holds folders of tasks that are not registered here: {', '.join(unknown)} (an "
                     "out-of-tree task is registered by EVALITA_TASK_PATH or its installed package)")
    return text


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

    def token_counter(self, tokenizer: Any | None, attention_span: int | None = None) -> TokenCounter:
        """One counter per plan: the plan's count and the stream's time split encode each text once."""
        if self._counter is None or self._counter.tokenizer is not tokenizer:
            self._counter = TokenCounter(tokenizer)
        self._counter.attention_span = attention_span or self._counter.attention_span
        return self._counter

    def work(self, tokenizer: Any | None, attention_span: int | None = None) -> list[TaskPlan]:
        """Per planned entry, the work it sends and what the cache holds (tokens counted with
        ``tokenizer``, else estimated from characters; rows weighted by ``attention_span``: ``scoring_work``)."""
        count = self.token_counter(tokenizer, attention_span)
        return [e.work(count) for e in self.entries.values()]

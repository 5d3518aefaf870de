"""Whether a run is comparable with the Evalita-LLM paper, and if not, why (results.json).

A run is comparable only when it is the paper's whole evaluation split of every task it
evaluates, with all of that task's prompts and its generation budget. Each departure is one
reason, in the words the report, the push-results card and ``compare`` show:

* ``--limit N``: only the first N items of each split (even an N past the split's size: the
  flag is a promise about the command, not about the data at hand);
* ``--max-new-tokens N`` different from the budget of a task that generates (the task's own,
  or the instruct setting's);
* ``--prompts`` leaving out a prompt of a task;
* ``--split S``: another split than the task's evaluation split.

Pure: it reads the run's configuration and the task declarations, nothing else.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..reporting.worth import NOT_COMPARABLE_KEY, limit_reason, split_reason
from ..sources.entries import TaskEntry
from .task_kinds import task_kind


def not_comparable_reasons(config: Any, entries: Iterable[TaskEntry]) -> list[str]:
    """Why a run of ``config`` (a RunConfig) over ``entries`` is not the paper's evaluation; [] when it is."""
    entries = list(entries)
    reasons = []
    if config.split is not None:
        reasons.append(split_reason(config.split))
    if config.limit is not None:
        reasons.append(limit_reason(config.limit))
    if config.max_new_tokens is not None:
        changed = sorted({f"{e.name} {b}" for e in entries if (b := task_kind(e, config.setting).budget) is not None and b != config.max_new_tokens})
        if changed:
            reasons.append(f"--max-new-tokens {config.max_new_tokens}: the paper's budget is {', '.join(changed)}")
    if config.prompts is not None:
        left_out = sorted({f"{e.name} {p}" for e in entries for p in task_kind(e, config.setting).declared_prompts() if p not in config.prompts})
        if left_out:
            reasons.append(f"--prompts {','.join(config.prompts)}: leaves out {', '.join(left_out)}")
    return reasons


def comparability_record(config: Any, entries: Iterable[TaskEntry]) -> dict[str, Any]:
    """The two keys of results.json: ``comparable_with_paper`` and the reasons it is false."""
    reasons = not_comparable_reasons(config, entries)
    return {"comparable_with_paper": not reasons, NOT_COMPARABLE_KEY: reasons}

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

from ..record.comparable import NOT_COMPARABLE_KEY, paper_reasons
from ..sources.entries import TaskEntry
from .task_kinds import task_kind


def not_comparable_reasons(config: Any, entries: Iterable[TaskEntry]) -> list[str]:
    """Why a run of ``config`` (a RunSpec) over ``entries`` is not the paper's evaluation; [] when it is.
    The rule is record/comparable.py's, which every reader applies again to the recorded config."""
    kinds = {e.name: task_kind(e, config.setting) for e in entries}
    return paper_reasons(config.split, config.limit, config.max_new_tokens, config.prompts,
                         {name: kind.budget for name, kind in kinds.items()},
                         {name: list(kind.declared_prompts()) for name, kind in kinds.items()})


def comparability_record(config: Any, entries: Iterable[TaskEntry]) -> dict[str, Any]:
    """The two keys of results.json: ``comparable_with_paper`` and the reasons it is false (what the
    run computed; readers recompute them, record/build.py)."""
    reasons = not_comparable_reasons(config, entries)
    return {"comparable_with_paper": not reasons, NOT_COMPARABLE_KEY: reasons}

"""Whether a run is comparable with the Evalita-LLM paper, and if not, why: one function of the record
(``not_comparable_reasons``), which the runner writes and every reader recomputes (docs/run-record.md,
"Comparability"). Each departure is one reason, in the words every output shows; ``--limit N`` counts even for an N
past the split's size: the flag is a promise about the command.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

NOT_COMPARABLE = "not comparable with the paper"
# results.json: the reasons ``comparable_with_paper`` is false.
NOT_COMPARABLE_KEY = "not_comparable_with_paper"


def split_reason(split: str) -> str:
    return f"--split {split}: not the tasks' evaluation split"


def limit_reason(limit: int) -> str:
    return f"--limit {limit}: only the first {limit} items of each task"


def paper_reasons(split: str | None, limit: int | None, max_new_tokens: int | None, prompts: Sequence[str] | None,
                  budgets: Mapping[str, int | None] | None, declared: Mapping[str, Iterable[str]]) -> list[str]:
    """Why a run is not the paper's evaluation ([] when it is). ``budgets``: task -> the paper's generation
    budget (None: the task does not generate; ``budgets`` None: not recorded, an older file);
    ``declared``: task -> its declared prompts; ``prompts``: the run's --prompts (None: all)."""
    reasons = []
    if split is not None:
        reasons.append(split_reason(split))
    if limit is not None:
        reasons.append(limit_reason(limit))
    if max_new_tokens is not None:
        if budgets is None:
            reasons.append(f"--max-new-tokens {max_new_tokens}: the generation budget was changed")
        elif changed := sorted({f"{task} {b}" for task, b in budgets.items() if b is not None and b != max_new_tokens}):
            reasons.append(f"--max-new-tokens {max_new_tokens}: the paper's budget is {', '.join(changed)}")
    if prompts is not None:
        left_out = sorted({f"{task} {p}" for task, names in declared.items() for p in names if p not in prompts})
        if left_out:
            reasons.append(f"--prompts {','.join(sorted(prompts))}: leaves out {', '.join(left_out)}")
    return reasons


def not_comparable_reasons(record: Any) -> list[str]:
    """Why ``record``'s run (a ``RunRecord``, model.py) is not the paper's evaluation ([] when it is), from its config
    and task records; a run read
    from another tool adds what that tool recorded and the config cannot show (its reader derives them)."""
    config, scored = record.config, [record.task_versions.get(t) for t in record.results]
    recorded = all(r is not None and r.budget_recorded for r in scored)
    budgets = {t: r.max_new_tokens for t, r in zip(record.results, scored) if r is not None} if recorded else None
    declared = {t: list(r.prompts) for t, r in zip(record.results, scored) if r is not None}
    reasons = paper_reasons(config.split, config.limit, config.max_new_tokens, config.prompts, budgets, declared)
    extra = record.source_tool.not_comparable_with_paper if record.source_tool is not None else []
    return reasons + [r for r in extra if r not in reasons]


def comparability_text(reasons: list[str]) -> str:
    """The value shown beside "comparable with the paper": yes, or no and every reason."""
    return "yes" if not reasons else "no: " + "; ".join(reasons)

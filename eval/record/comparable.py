"""Whether a run is comparable with the Evalita-LLM paper, and if not, why: one function of the record
(``not_comparable_reasons``), which the runner writes and every reader recomputes (docs/run-record.md,
"Comparability"). Each departure is one reason, in the words every output shows; ``--limit N`` counts even for an N
past the split's size: the flag is a promise about the command."""

from __future__ import annotations

from typing import Any

NOT_COMPARABLE = "not comparable with the paper"
# results.json: the reasons ``comparable_with_paper`` is false.
NOT_COMPARABLE_KEY = "not_comparable_with_paper"


def limit_reason(limit: int | float) -> str:
    """A count of items (ours, lm-eval's) or a share below 1 (lm-eval's float ``--limit``)."""
    if limit < 1:
        return f"--limit {limit}: only that share of each task's items"
    return f"--limit {int(limit)}: only the first {int(limit)} items of each task"


def not_comparable_reasons(record: Any) -> list[str]:
    """Why ``record``'s run (a ``RunRecord``, model.py) is not the paper's evaluation ([] when it is), from its config
    and task records; a run read from another tool adds what that tool recorded and the config cannot show (its
    reader derives them)."""
    config, scored = record.config, [record.task_versions.get(t) for t in record.results]
    reasons = [f"--split {config.split}: not the tasks' evaluation split"] if config.split is not None else []
    reasons += [limit_reason(config.limit)] if config.limit is not None else []
    if (max_new_tokens := config.max_new_tokens) is not None:
        if not all(r is not None and r.budget_recorded for r in scored):  # an older file: the budgets not recorded
            reasons.append(f"--max-new-tokens {max_new_tokens}: the generation budget was changed")
        elif changed := sorted({f"{task} {r.max_new_tokens}" for task, r in zip(record.results, scored)
                                if r.max_new_tokens is not None and r.max_new_tokens != max_new_tokens}):
            reasons.append(f"--max-new-tokens {max_new_tokens}: the paper's budget is {', '.join(changed)}")
    if (prompts := config.prompts) is not None:  # --prompts (None: all) against each task's declared prompts
        left_out = sorted({f"{task} {p}" for task, r in zip(record.results, scored) if r is not None
                           for p in r.prompts if p not in prompts})
        if left_out:
            reasons.append(f"--prompts {','.join(sorted(prompts))}: leaves out {', '.join(left_out)}")
    extra = record.source_tool.not_comparable_with_paper if record.source_tool is not None else []
    return reasons + [r for r in extra if r not in reasons]


def comparability_text(reasons: list[str]) -> str:
    """The value shown beside "comparable with the paper": yes, or no and every reason."""
    return "yes" if not reasons else "no: " + "; ".join(reasons)

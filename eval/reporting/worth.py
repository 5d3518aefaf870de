"""What a score is worth: comparable with the paper or not (and why), and how many items it rests on.

``MIN_ITEMS``: a score on fewer items is printed with "not a measurement". Below 30 items the
95 % interval of an accuracy near 50 % is wider than ±18 points (1.96·√(0.25/30) = 0.179), more
than the differences between models the benchmark exists to show; the quickstart's
``--limit 2`` runs are checks that the pipeline works, never numbers to quote.
"""

from __future__ import annotations

from typing import Any

MIN_ITEMS = 30
NOT_A_MEASUREMENT = f"not a measurement: fewer than {MIN_ITEMS} items"
NOT_COMPARABLE = "not comparable with the paper"
# results.json: the reasons ``comparable_with_paper`` is false (running/comparability.py).
NOT_COMPARABLE_KEY = "not_comparable_with_paper"


def split_reason(split: str) -> str:
    return f"--split {split}: not the tasks' evaluation split"


def limit_reason(limit: int) -> str:
    return f"--limit {limit}: only the first {limit} items of each task"


def recorded_reasons(doc: dict) -> list[str]:
    """The reasons a results.json gives; for a file written before they were recorded, those its config shows."""
    recorded = doc.get(NOT_COMPARABLE_KEY)
    if isinstance(recorded, list) and all(isinstance(r, str) for r in recorded):
        return list(recorded)
    config: dict[str, Any] = doc.get("config") if isinstance(doc.get("config"), dict) else {}
    reasons = []
    if config.get("split"):
        reasons.append(split_reason(config["split"]))
    if config.get("limit") is not None:
        reasons.append(limit_reason(config["limit"]))
    if config.get("max_new_tokens") is not None:
        reasons.append(f"--max-new-tokens {config['max_new_tokens']}: the generation budget was changed")
    if not reasons and doc.get("comparable_with_paper") is False:
        reasons.append("the file says so (comparable_with_paper: false) without a reason")
    return reasons


def comparability_text(reasons: list[str]) -> str:
    """The value shown beside "comparable with the paper": yes, or no and every reason."""
    return "yes" if not reasons else "no: " + "; ".join(reasons)


def n_text(n: Any) -> str:
    """An item count as shown beside a score: 'n=2 (not a measurement: fewer than 30 items)' below MIN_ITEMS."""
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return "n=?"
    return f"n={int(n)}" + (f" ({NOT_A_MEASUREMENT})" if n < MIN_ITEMS else "")


def small_n_note(label: str, prompts: dict) -> str | None:
    """'label: n=2, not a measurement: ...' when a prompt of a task's results (prompt -> {"n", ...}) has fewer than MIN_ITEMS items."""
    ns = [p["n"] for p in prompts.values() if isinstance(p, dict) and isinstance(p.get("n"), (int, float)) and not isinstance(p["n"], bool)]
    if not ns or min(ns) >= MIN_ITEMS:
        return None
    return f"{label}: n={int(min(ns))}, {NOT_A_MEASUREMENT}"

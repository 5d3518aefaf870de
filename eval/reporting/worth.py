"""What a score is worth: how many items it rests on (comparability: record/comparable.py). A score on fewer than
``MIN_ITEMS`` is "not a measurement": below 30 items the 95 % interval of an accuracy near 50 % is wider than ±18 points
(1.96·√(0.25/30) = 0.179), more than the differences between models the benchmark exists to show."""

from __future__ import annotations

MIN_ITEMS = 30
NOT_A_MEASUREMENT = f"not a measurement: fewer than {MIN_ITEMS} items"


def small_n_note(label: str, prompts: dict) -> str | None:
    """'label: n=2, not a measurement: ...' when a prompt of a task's results (prompt -> {"n", ...}) has fewer than
    MIN_ITEMS items."""
    ns = [p["n"] for p in prompts.values()]  # counts: record/results.schema.json
    if not ns or min(ns) >= MIN_ITEMS:
        return None
    return f"{label}: n={int(min(ns))}, {NOT_A_MEASUREMENT}"

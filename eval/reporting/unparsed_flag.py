"""The flag of a score that rests on few parsed answers (issue 28; EuroEval flags the same share).

A prompt is flagged when 10 % or more of its answers could not be read (``unparsed`` / ``n``
of its scores in results.json). Those answers are scored as wrong, so the score says more
about the answer format than about the task. Every place that shows a prompt's score marks
it: results.json (``unparsed_flags``), the report (Markdown and HTML), the console summary,
``compare`` (which then does not test the difference) and the push-results card.
"""

from __future__ import annotations

import math
from typing import Mapping

FLAG_SHARE = 0.10  # flagged at this share of unparsed answers or more
MARK = "(!)"
EXPLAIN = (f"{MARK}: 10 % or more of the prompt's answers could not be read (unparsed, scored as wrong); "
           "the score rests on the others")


def _count(value: object) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None  # type: ignore[arg-type]


def unparsed_share(scores: Mapping) -> float | None:
    """unparsed / n of one prompt's scores; None where the prompt has no such count (or a malformed one)."""
    unparsed, n = _count(scores.get("unparsed")), _count(scores.get("n"))
    if unparsed is None or n is None or n <= 0:
        return None
    return unparsed / n


def is_flagged(scores: Mapping) -> bool:
    share = unparsed_share(scores)
    return share is not None and share >= FLAG_SHARE


def flag_mark(scores: Mapping) -> str:
    """' (!)' after a flagged prompt's scores, else ''."""
    return f" {MARK}" if is_flagged(scores) else ""


def flag_legend(results: Mapping[str, Mapping[str, Mapping]]) -> str:
    """The line under a table of ``results`` that explains the mark, where a prompt is flagged, else ''."""
    return f"\n{EXPLAIN}" if any(is_flagged(s) for prompts in results.values() for s in prompts.values()) else ""


def flag_text(scores: Mapping) -> str:
    """'(!) 6/8 unparsed' for a flagged prompt, else ''."""
    if not is_flagged(scores):
        return ""
    return f"{MARK} {int(scores['unparsed'])}/{int(scores['n'])} unparsed"


def flagged_prompts(results: Mapping[str, Mapping[str, Mapping]]) -> dict[str, dict[str, dict]]:
    """results.json ``unparsed_flags``: task -> prompt -> {unparsed, n, share} of every flagged prompt."""
    out: dict[str, dict[str, dict]] = {}
    for task, prompts in results.items():
        for prompt, scores in prompts.items():
            if is_flagged(scores):
                out.setdefault(task, {})[prompt] = {"unparsed": scores["unparsed"], "n": scores["n"],
                                                    "share": round(unparsed_share(scores) or 0.0, 4)}
    return out


def flag_notes(task: str, prompts: Mapping[str, Mapping], label: str = "") -> list[str]:
    """One note per flagged prompt of a task: '<label>: sa p1 (!) 6/8 unparsed: ...'."""
    return [f"{label + ': ' if label else ''}{task} {prompt} {flag_text(scores)}: 10 % or more of its answers "
            "could not be read (scored as wrong); the score rests on the others" for prompt, scores in prompts.items() if is_flagged(scores)]


def untested_reason(prompt: str, scores_a: Mapping | None, scores_b: Mapping | None) -> str | None:
    """Why ``compare`` does not test a prompt's difference (a side is flagged), or None."""
    sides = [f"{side} {flag_text(s)}" for side, s in (("A", scores_a), ("B", scores_b)) if s is not None and is_flagged(s)]
    if not sides:
        return None
    return f"{prompt} has >= 10 % unparsed answers ({', '.join(sides)}): its score rests on the others"


def untested_avgp_reason(flagged: list[str]) -> str | None:
    """Why ``compare`` does not test a task's AvgP: the flagged prompts it averages, or None."""
    if not flagged:
        return None
    return f"{', '.join(flagged)} {'has' if len(flagged) == 1 else 'have'} >= 10 % unparsed answers (their rows say where)"

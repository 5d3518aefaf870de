"""The flag of a score that rests on few parsed answers (issues 28, 40, 47; docs/settings.md, "Scores and unparseable
answers"): 10 % or more of a prompt's answers unparsed, scored as wrong, so the score says more about the answer format
than the task."""

from __future__ import annotations

import math
from typing import Mapping

FLAG_SHARE = 0.10  # flagged at this share of unparsed answers or more
MARK = "(!)"
NONE_READ = "no answer read"
EXPLAIN = (f"{MARK}: 10 % or more of the prompt's answers could not be read (unparsed, scored as wrong); the score "
           "rests on the others")
NONE_READ_WHY = ("none of its answers could be read in the task's answer format; the score is lm-eval's rule for such "
                 "answers (a choice task: each a wrong choice; a generative task: each scored as generated, read as "
                 "empty where nothing fits, right on an item whose gold is empty), not a measure of answers read")


def finite_number(value: object) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None  # type: ignore[arg-type]


def unparsed_share(scores: Mapping) -> float | None:
    """unparsed / n of one prompt's scores; None where the prompt has no such count (or a malformed one)."""
    unparsed, n = finite_number(scores.get("unparsed")), finite_number(scores.get("n"))
    if unparsed is None or n is None or n <= 0:
        return None
    return unparsed / n


def none_read(scores: Mapping) -> bool:
    """Every answer of the prompt was unparsed (and there was at least one)."""
    share = unparsed_share(scores)
    return share is not None and share >= 1.0


def none_read_text(scores: Mapping) -> str:
    """'no answer read (2/2 unparsed)' for a prompt none of whose answers was read, else ''."""
    return f"{NONE_READ} ({int(scores['unparsed'])}/{int(scores['n'])} unparsed)" if none_read(scores) else ""


def none_read_prompts(results: Mapping[str, Mapping[str, Mapping]]) -> list[str]:
    """'task prompt' of every prompt of ``results`` none of whose answers was read."""
    return [f"{task} {prompt}" for task, prompts in results.items()
            for prompt, scores in prompts.items() if none_read(scores)]


def none_read_summary(prompts: list[str]) -> str:
    """What a summary that averages such prompts says it includes: '1 prompt with no answer read (ner_fic p2)', or ''.
    """
    if not prompts:
        return ""
    return f"{len(prompts)} prompt{'s' if len(prompts) > 1 else ''} with {NONE_READ} ({', '.join(prompts)})"


def is_flagged(scores: Mapping) -> bool:
    share = unparsed_share(scores)
    return share is not None and share >= FLAG_SHARE


def flag_mark(scores: Mapping) -> str:
    """' (!)' after a flagged prompt's scores (' (!) no answer read (2/2 unparsed)' where none was read), else ''."""
    return f" {flag_text(scores)}" if none_read(scores) else f" {MARK}" if is_flagged(scores) else ""


def flag_legend(results: Mapping[str, Mapping[str, Mapping]]) -> str:
    """The line under a table of ``results`` that explains the mark, where a prompt is flagged, else ''."""
    legend = f"\n{EXPLAIN}" if any(is_flagged(s) for prompts in results.values() for s in prompts.values()) else ""
    return legend + (f"\n{NONE_READ}: {NONE_READ_WHY}" if none_read_prompts(results) else "")


def flag_text(scores: Mapping) -> str:
    """'(!) 6/8 unparsed' for a flagged prompt ('(!) no answer read (8/8 unparsed)' where none was read), else ''."""
    if not is_flagged(scores):
        return ""
    if none_read(scores):
        return f"{MARK} {none_read_text(scores)}"
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
    return [f"{label + ': ' if label else ''}{task} {prompt} {flag_text(scores)}: "
            + (NONE_READ_WHY if none_read(scores) else "10 % or more of its answers could not be read (scored as "
                                                       "wrong); the score rests on the others")
            for prompt, scores in prompts.items() if is_flagged(scores)]


def untested_reason(prompt: str, scores_a: Mapping | None, scores_b: Mapping | None) -> str | None:
    """Why ``compare`` does not test a prompt's difference (a side is flagged), or None."""
    sides = [f"{side} {flag_text(s)}"
             for side, s in (("A", scores_a), ("B", scores_b)) if s is not None and is_flagged(s)]
    if not sides:
        return None
    unread = any(s is not None and none_read(s) for s in (scores_a, scores_b))
    why = "a score of unread answers alone is not tested" if unread else "its score rests on the others"
    return f"{prompt} has >= 10 % unparsed answers ({', '.join(sides)}): {why}"


def untested_avgp_reason(flagged: list[str], unread: list[str] = ()) -> str | None:
    """Why ``compare`` does not test a task's AvgP: the flagged prompts it averages (``unread``: those of them
    with no answer read on a side), or None."""
    if not flagged:
        return None
    text = (f"{', '.join(flagged)} {'has' if len(flagged) == 1 else 'have'} >= 10 % unparsed answers (their rows say "
            "where)")
    return text + (f"; the AvgP includes {none_read_summary(list(unread))}" if unread else "")

"""Semantic checks of records that JSON Schema cannot express, shared by several tasks."""

from __future__ import annotations

from .converters.common import option_key


def choice_problems(rec: dict, letters: list[str], answer_field: str) -> list[str]:
    """One correct letter naming an existing option; option texts pairwise different.

    Options are compared after whitespace/case normalisation (:func:`option_key`):
    two options that differ only there would make the item ambiguous.
    """
    problems = []
    answer = rec.get(answer_field)
    if answer not in letters or not isinstance(rec.get(answer), str):
        problems.append(f"{answer_field}: {answer!r} does not name one of the options {letters}")
    first: dict[str, str] = {}
    for letter in letters:
        key = option_key(rec.get(letter, ""))
        if key in first:
            problems.append(f"{letter}: same text as option {first[key]} (after whitespace/case normalisation)")
        else:
            first[key] = letter
    return problems

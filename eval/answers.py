"""Matching a generated answer to the options of a multiple-choice item (instruct settings).

Two rules, documented in docs/settings.md and never raising on any input:

* ``parse_letter`` (CE): the identifier the model names. The answer, stripped of
  whitespace and of the punctuation around it, that is exactly one allowed letter (any
  case) is that letter; otherwise the first *uppercase* allowed letter standing alone
  (``"Risposta: B"``, ``"B) Sì"``, ``"(C)"``). Lowercase letters inside a sentence are not
  taken: Italian "a", "e" and "o" are words. Anything else is unparseable (None).
* ``match_option`` (CE-NI and OE): which option text the answer gives. Both sides are
  normalised by ``normalize``: Unicode NFKD with the accents removed ("Sì" = "si", as
  people type it without accents), case folded, every character that is not a letter or
  a digit turned into a space ("all'odio" = "all odio"), whitespace collapsed. Then an
  answer equal to an option is that option; otherwise the options occurring in it as
  whole words are found, every occurrence lying inside a longer option's occurrence is
  dropped (so "non hanno lo stesso significato" gives that option, not "hanno lo stesso
  significato"), and the earliest remaining occurrence wins (the longest on a tie). No
  occurrence: unparseable (None).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Sequence

_NOT_WORD = re.compile(r"[^\w]|_")
_SPACES = re.compile(r"\s+")
_EDGE_PUNCT = " \t\r\n.,;:!?()[]{}\"'*`"


def normalize(text: str) -> str:
    """Accents removed, case folded, punctuation to spaces, whitespace collapsed."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _SPACES.sub(" ", _NOT_WORD.sub(" ", bare.casefold())).strip()


def parse_letter(answer: str, letters: Sequence[str]) -> int | None:
    """Index in ``letters`` of the identifier the answer names, or None."""
    allowed = {letter.upper(): i for i, letter in enumerate(letters)}
    bare = answer.strip(_EDGE_PUNCT).upper()
    if bare in allowed:
        return allowed[bare]
    for match in re.finditer(r"(?<![^\W_])([A-Z])(?![^\W_])", answer):
        if match.group(1) in allowed:
            return allowed[match.group(1)]
    return None


def match_option(answer: str, options: Sequence[str]) -> int | None:
    """Index of the option the answer gives (rule in the module docstring), or None."""
    text = normalize(answer)
    normalized = [normalize(o) for o in options]
    for i, opt in enumerate(normalized):
        if opt and text == opt:
            return i
    padded = f" {text} "
    found: list[tuple[int, int, int]] = []  # (start, end, option index)
    for i, opt in enumerate(normalized):
        if not opt:
            continue
        needle = f" {opt} "
        start = padded.find(needle)
        while start >= 0:
            found.append((start, start + len(needle), i))
            start = padded.find(needle, start + 1)
    kept = [
        f for f in found
        if not any(o[0] <= f[0] and f[1] <= o[1] and (o[1] - o[0]) > (f[1] - f[0]) for o in found)
    ]
    if not kept:
        return None
    kept.sort(key=lambda f: (f[0], -(f[1] - f[0]), f[2]))
    return kept[0][2]

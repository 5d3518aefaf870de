"""Matching a generated answer to the options of a multiple-choice item (instruct settings).

The rules read what the model *answered*, not what it repeated from the prompt, and never
raise on any input. docs/settings.md documents them with examples from real outputs.

Shared by both rules:

* An **option line** is a line that starts with an option label, an uppercase letter of
  the options followed by ``:``, ``)``, ``.`` or ``-`` (``B: Sì``, ``A) ...``, ``(C) ...``).
  Option lines are echoes of the option list and are not read as answers, unless the
  option line is the whole answer.
* The **first segment** is the answer's first non-empty line that is not an option line, cut
  at the first ``,;.!?``.

* ``parse_letter`` (CE): the identifier the model names. In order:
  ``letter``: the whole answer, stripped of whitespace and surrounding punctuation, is one
  allowed letter (any case); ``label``: the whole answer is one option line: its letter,
  unless the text after the label is *another* option's text (``B: "No"`` when B is
  "Sì": contradictory, unparsed); ``in_text``: the first uppercase allowed letter standing
  alone in the lines that are not option lines (``Risposta: B``); a sentence-initial
  ``A``/``E``/``I``/``O`` followed by a lowercase word is the Italian word, not a letter,
  and so is a letter followed by an apostrophe (``E' la B``, ``C'è``).
  A text answer without a letter (``No``) is unparsed: CE asks for the letter, and
  CE-NI scores option texts.
* ``match_option`` (CE-NI and OE): which option text the answer gives. Texts are compared
  after ``normalize`` (accents removed, case folded, punctuation to spaces). An answer
  whose first lines are the first two options in their listed order (the option list
  echoed, ``No\nSì\nRispondi ...``) gives none. An option of
  one accented word (``Sì``) is found inside a longer text only with its accent, since
  ``si`` is also a pronoun (``Non si può dire`` gives no option). In order: ``exact``:
  the whole answer (an option line: the text after its label), its first segment, or
  the text after a colon in the first segment (``Risposta: Si``) equals an option; ``start``: the first segment starts with options as whole words: the
  longest (``No, non credo``, ``Neutro o Misto``); ``in_text``: every whole-word
  occurrence of the options in the lines that are not option lines, those inside a longer
  option's occurrence dropped, the earliest wins (the longest on a tie).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Sequence

_NOT_WORD = re.compile(r"[^\w]|_")
_SPACES = re.compile(r"\s+")
_EDGE_PUNCT = " \t\r\n.,;:!?()[]{}\"'*`«»“”"
_OPTION_LINE = re.compile(r"^\s*[(\[]?([A-Z])\s*[):.\]-](?:\s+|$)(.*)$")
_SEGMENT_END = re.compile(r"[,;.!?]")
# Italian one-letter words that open a sentence ("A questa domanda", "E poi", "I due", "O meglio").
_WORD_LETTERS = "AEIO"
LETTER_RULES = ("letter", "label", "in_text")
OPTION_RULES = ("exact", "start", "in_text")


def normalize(text: str, keep_accents: bool = False) -> str:
    """Case folded, punctuation to spaces, whitespace collapsed; accents removed unless ``keep_accents``."""
    if keep_accents:
        bare = unicodedata.normalize("NFKC", text)  # same length as the folded form: positions line up
    else:
        decomposed = unicodedata.normalize("NFKD", text)
        bare = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _SPACES.sub(" ", _NOT_WORD.sub(" ", bare.casefold())).strip()


def _lines(answer: str) -> list[str]:
    return [line for line in answer.splitlines() if line.strip()]


def _option_line(line: str, letters: Sequence[str]) -> tuple[str, str] | None:
    """(letter, text after the label) when ``line`` starts with an option label, else None."""
    m = _OPTION_LINE.match(line)
    if m is None or m.group(1) not in letters:
        return None
    return m.group(1), m.group(2)


def _unechoed(answer: str, letters: Sequence[str]) -> list[str]:
    """The answer's non-empty lines that are not option lines (echoes of the option list)."""
    return [line for line in _lines(answer) if _option_line(line, letters) is None]


def parse_letter_rule(answer: str, letters: Sequence[str], option_texts: Sequence[str] | None = None) -> tuple[int | None, str | None]:
    """(index in ``letters``, rule name) of the identifier the answer names; (None, None) if none.

    ``option_texts`` (the options' texts, in the letters' order) lets a labelled answer be
    checked against its own option's text."""
    allowed = {letter.upper(): i for i, letter in enumerate(letters)}
    bare = answer.strip(_EDGE_PUNCT).upper()
    if bare in allowed:
        return allowed[bare], "letter"
    lines = _lines(answer)
    labelled = _option_line(lines[0], list(allowed)) if len(lines) == 1 else None
    if labelled is not None:
        index = allowed[labelled[0]]
        if option_texts is not None and labelled[1].strip(_EDGE_PUNCT):
            said = match_option(labelled[1], option_texts)
            if said is not None and said != index:
                return None, None  # the letter of one option with the text of another: contradictory
        return index, "label"
    for line in _unechoed(answer, list(allowed)):
        for m in re.finditer(r"(?<![^\W_])([A-Z])(?![^\W_])", line):
            letter = m.group(1)
            if letter not in allowed:
                continue
            before, after = line[: m.start()].rstrip(), line[m.end():]
            if after.startswith(("'", "’")):
                continue  # an elided word: "E' la B" (è), "C'è", "D'accordo"
            sentence_start = not before or before[-1] in ".!?:;"
            if letter in _WORD_LETTERS and sentence_start and re.match(r" +[a-zà-ÿ]", after):
                continue  # "A questa domanda ...": the preposition, not option A
            return allowed[letter], "in_text"
    return None, None


def parse_letter(answer: str, letters: Sequence[str], option_texts: Sequence[str] | None = None) -> int | None:
    """Index in ``letters`` of the identifier the answer names (rule in the module docstring), or None."""
    return parse_letter_rule(answer, letters, option_texts)[0]


def _accent_bound(option: str) -> bool:
    """One accented word (Sì): its accent-free form is another word (si), so accents count inside a text."""
    return " " not in normalize(option) and normalize(option) != normalize(option, keep_accents=True)


def _occurrences(text: str, options: Sequence[str], whole_start: bool = False) -> list[tuple[int, int, int]]:
    """(start, end, option index) of every whole-word occurrence; only at position 0 with ``whole_start``."""
    found: list[tuple[int, int, int]] = []
    for keep in (False, True):
        padded = f" {normalize(text, keep)} "
        for i, option in enumerate(options):
            opt = normalize(option, keep)
            if not opt or _accent_bound(option) != keep:
                continue
            needle = f" {opt} "
            start = padded.find(needle)
            while start >= 0 and (start == 0 or not whole_start):
                found.append((start, start + len(needle), i))
                start = padded.find(needle, start + 1)
    return found


def _earliest(found: list[tuple[int, int, int]]) -> int | None:
    """The earliest occurrence not inside a longer one (the longest on a tie)."""
    kept = [
        f for f in found
        if not any(o[0] <= f[0] and f[1] <= o[1] and (o[1] - o[0]) > (f[1] - f[0]) for o in found)
    ]
    if not kept:
        return None
    kept.sort(key=lambda f: (f[0], -(f[1] - f[0]), f[2]))
    return kept[0][2]


def match_option_rule(answer: str, options: Sequence[str]) -> tuple[int | None, str | None]:
    """(index, rule name) of the option the answer gives (rule in the module docstring); (None, None) if none."""
    normalized = [normalize(o) for o in options]
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(options)]
    lines = _lines(answer)
    if not lines:
        return None, None
    if len(options) >= 2 and [normalize(line) for line in lines[:2]] == normalized[:2] and len(lines) >= 2:
        return None, None  # the option list echoed as CE-NI shows it ("No\nSì\nRispondi ..."): no answer
    labelled = _option_line(lines[0], letters) if len(lines) == 1 else None
    whole = labelled[1] if labelled is not None else answer
    first = _unechoed(answer, letters)[:1] or [whole]
    segment = _SEGMENT_END.split(first[0].strip().lstrip(_EDGE_PUNCT), maxsplit=1)[0]
    # The answer itself first: an option may look like an option line ("E. coli").
    for candidate in (answer, whole, segment, segment.rsplit(":", 1)[-1]):  # "Risposta: Si": what follows the cue
        text = normalize(candidate)
        for i, opt in enumerate(normalized):
            if opt and text == opt:
                return i, "exact"
    at_start = _earliest(_occurrences(segment, options, whole_start=True))
    if at_start is not None:
        return at_start, "start"
    in_text = _earliest(_occurrences("\n".join(_unechoed(answer, letters) or [whole]), options))
    return (in_text, "in_text") if in_text is not None else (None, None)


def match_option(answer: str, options: Sequence[str]) -> int | None:
    """Index of the option the answer gives (rule in the module docstring), or None."""
    return match_option_rule(answer, options)[0]

"""Matching a generated answer to the options of a multiple-choice item (instruct settings): the procedure and its
examples are in docs/settings.md, "Matching answers". Both rules return ``(index, rule)`` for a credited reply and
``(None, reason)`` for an unparsed one (the reason one of ``UNPARSED_REASONS``); they never raise."""

from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple, Sequence

_NOT_WORD = re.compile(r"[^\w]|_")
_SPACES = re.compile(r"\s+")
_EDGE_PUNCT = " \t\r\n.,;:!?()[]{}\"'*`«»“”"
_OPTION_LINE = re.compile(r"^\s*[(\[]?([A-Z])\s*[):.\]-](?:\s+|$)(.*)$")
_BARE_LABEL = re.compile(r"^\s*[(\[]?([A-Z])\s*[):.\]-]?\s*$")
_SEGMENT_END = re.compile(r"[,;.!?]")
_TOKEN = re.compile(r"[^\W_]+|[,;.!?:\n]")
_LETTER = re.compile(r"(?<![^\W_])([A-Z])(?![^\W_])")
# Italian one-letter words that open a sentence ("A questa domanda", "E poi", "I due", "O meglio").
_WORD_LETTERS = "AEIO"
_CONJUNCTION_LETTER = re.compile(r" *(?:e|ed|o|oppure|né|,) *[(\[]?[A-Z](?![^\W_])")
_NEGATIONS = frozenset({"non", "né", "neanche", "nemmeno", "neppure", "not"})
# said of an option after it, in its clause: "la B è sbagliata", "Positivo is wrong"
_WRONG = frozenset({"sbagliata", "sbagliato", "errata", "errato", "falsa", "falso", "scorretta", "scorretto", "wrong",
                    "incorrect"})
_CLAUSE_BREAKS = frozenset({",", ";", ".", "!", "?", ":", "\n", "ma", "bensì", "bensi", "però", "pero", "invece"})
_BOTH = frozenset({"entrambe", "entrambi", "ambedue", "both"})
UNPARSED_REASONS = ("echo", "label_contradicts_text", "several", "negated", "no_option")


def normalize(text: str, keep_accents: bool = False) -> str:
    """Case folded, punctuation to spaces, whitespace collapsed; accents removed unless ``keep_accents``."""
    bare = unicodedata.normalize("NFKC", text) if keep_accents else _strip_accents(text)
    return _SPACES.sub(" ", _NOT_WORD.sub(" ", bare.casefold())).strip()


def _tokens(text: str) -> list[str]:
    """Words (case folded, accents kept) and clause punctuation, in order."""
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def _negated(before: Sequence[str], after: Sequence[str] = ()) -> bool:
    """A negation among the tokens of the clause that ends where ``before`` ends, or a word saying
    it is wrong among those of the clause that goes on with ``after``."""
    for tokens, words in ((reversed(before), _NEGATIONS), (after, _WRONG)):
        for token in tokens:
            if token in _CLAUSE_BREAKS:
                break
            if token in words:
                return True
    return False


def _lines(answer: str) -> list[str]:
    return [line for line in answer.splitlines() if line.strip()]


def _label(line: str, letters: Sequence[str]) -> tuple[str, str] | None:
    """(letter, text after the label) when ``line`` starts with an option label or is one, else None."""
    m = _OPTION_LINE.match(line) or _BARE_LABEL.match(line)
    if m is None or m.group(1) not in letters:
        return None
    return m.group(1), (m.group(2) if m.re is _OPTION_LINE else "")


def _is_option_line(line: str, last: bool, letters: Sequence[str], texts: Sequence[str]) -> bool:
    """A line of the option list: labelled, an option's text, or (last line) the start of one cut by the budget."""
    if _label(line, letters) is not None or (last and line.strip() in ("(", "[")):  # "(": a label "(B)" cut
        return True
    said = normalize(line)
    if not said:
        return False
    return any(said == t or (last and t.startswith(said)) for t in (normalize(x) for x in texts) if t)


def _echo(lines: list[str], letters: Sequence[str], texts: Sequence[str]) -> bool:
    """Two or more option lines; or a labelled line after text that is no cue ending in ':' (the prompt
    restated, then its option list begun: 'Cosa è il deposito cauzionale?\nA:')."""
    if any(_label(line, letters) is not None and not lines[i - 1].rstrip().endswith(":")
           for i, line in enumerate(lines) if i):
        return True
    return sum(_is_option_line(line, i == len(lines) - 1, letters, texts) for i, line in enumerate(lines)) >= 2


def _label_contradicts(text: str, index: int, texts: Sequence[str]) -> bool:
    """The label's text is not its option's (equal, or one a prefix of the other, normalised), or is exactly another
    option's text."""
    if not text.strip(_EDGE_PUNCT) or index >= len(texts):
        return False
    said, opt = normalize(text), normalize(texts[index])
    other = any(said == normalize(t) for j, t in enumerate(texts) if j != index and normalize(t) != opt)
    return other or not (bool(opt) and (said == opt or opt.startswith(said) or said.startswith(opt + " ")))


class _Named(NamedTuple):
    positive: list[int]  # options named, in order of first mention
    negated: set[int]


def _verdict(named: _Named, tokens: Sequence[str]) -> tuple[int | None, str | None]:
    """(the one option named, None) or (None, reason)."""
    positive = list(dict.fromkeys(named.positive))
    if _BOTH & set(tokens) or len(positive) >= 2:
        return None, "several"
    if len(positive) == 1:
        return (None, "negated") if positive[0] in named.negated else (positive[0], None)
    if len(named.negated) >= 2:
        return None, "several"
    return None, ("negated" if named.negated else "no_option")


def _letter_mentions(lines: Sequence[str], allowed: dict[str, int]) -> _Named:
    """The option letters standing alone in ``lines`` (CE), and which of them are negated."""
    named = _Named([], set())
    for line in lines:
        for m in _LETTER.finditer(line):
            letter = m.group(1)
            if letter not in allowed:
                continue
            before, after = line[: m.start()].rstrip(), line[m.end():]
            if after.startswith(("'", "’")):
                continue  # an elided word: "E' la B" (è), "C'è", "D'accordo"
            sentence_start = not before or before[-1] in ".!?:;"
            if (letter in _WORD_LETTERS and sentence_start and re.match(r" +[a-zà-ÿ]", after)
                    and not _CONJUNCTION_LETTER.match(after)):
                continue  # "A questa domanda ...": the preposition, not option A ("A e B" is two options)
            if _negated(_tokens(line[: m.start()]), _tokens(line[m.end():])):
                named.negated.add(allowed[letter])
            else:
                named.positive.append(allowed[letter])
    return named


def parse_letter_rule(answer: str, letters: Sequence[str],
                      option_texts: Sequence[str] | None = None) -> tuple[int | None, str]:
    """(index in ``letters``, rule) of the one option the answer names, or (None, reason): module docstring.

    ``option_texts`` (the options' texts, in the letters' order) lets echoes of the texts be
    recognised and a labelled answer be checked against its own option's text."""
    allowed = {letter.upper(): i for i, letter in enumerate(letters)}
    texts = list(option_texts or [])
    bare = answer.strip(_EDGE_PUNCT).upper()
    if bare in allowed:
        return allowed[bare], "letter"
    lines = _lines(answer)
    if _echo(lines, list(allowed), texts):
        return None, "echo"
    named, rule, rest = _Named([], set()), "in_text", []
    for line in lines:
        labelled = _label(line, list(allowed))
        if labelled is None:
            rest.append(line)
            continue
        index = allowed[labelled[0]]
        if _label_contradicts(labelled[1], index, texts):
            return None, "label_contradicts_text"
        named.positive.append(index)
        rule = "label"
    mentions = _letter_mentions(rest, allowed)
    named.positive.extend(mentions.positive)
    named.negated.update(mentions.negated)
    words = _words("\n".join(rest))
    found = _occurrences(words, texts)
    if named.positive:  # an option's text beside the letter names that option too: it must be the same one
        for start, end, i in found:
            if words.negated(start, end):
                named.negated.add(i)
            else:
                named.positive.append(i)
    index, reason = _verdict(named, _uncovered(words, found))
    return (index, rule) if index is not None else (None, reason or "no_option")


def _strip_accents(token: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFKD", token) if not unicodedata.combining(ch))


class _Words(NamedTuple):
    words: list[str]  # case folded, accents kept
    bare: list[str]  # the same words without accents
    before: list[bool]  # a negation precedes the word in its clause
    after: list[bool]  # a word saying "wrong" follows it in its clause

    def negated(self, start: int, end: int) -> bool:
        return self.before[start] or self.after[end - 1]


def _clause_flags(tokens: Sequence[str], marks: frozenset[str]) -> list[bool]:
    """Per token: one of ``marks`` came before it in its clause."""
    flags, seen = [], False
    for token in tokens:
        seen = seen and token not in _CLAUSE_BREAKS
        flags.append(seen)
        seen = seen or token in marks
    return flags


def _words(text: str) -> _Words:
    tokens = _tokens(text)
    before = _clause_flags(tokens, _NEGATIONS)
    after = _clause_flags(tokens[::-1], _WRONG)[::-1]
    out = _Words([], [], [], [])
    for token, neg, wrong in zip(tokens, before, after):
        if token[0].isalnum():
            out.words.append(token)
            out.bare.append(_strip_accents(token))
            out.before.append(neg)
            out.after.append(wrong)
    return out


def _occurrences(words: _Words, options: Sequence[str]) -> list[tuple[int, int, int]]:
    """(start, end, option index) in ``words`` of every whole-word occurrence, those inside a longer one dropped."""
    found: list[tuple[int, int, int]] = []
    for i, option in enumerate(options):
        # One accented word (Sì): its accent-free form is another word (si), so accents count inside a text.
        keep = " " not in normalize(option) and normalize(option) != normalize(option, keep_accents=True)
        needle = _words(option).words if keep else _words(option).bare
        hay = words.words if keep else words.bare
        k = len(needle)
        if k:
            found += [(s, s + k, i) for s in range(len(hay) - k + 1) if hay[s:s + k] == needle]
    return [f for f in found if not any(o[0] <= f[0] and f[1] <= o[1] and (o[1] - o[0]) > (f[1] - f[0]) for o in found)]


def _uncovered(words: _Words, found: list[tuple[int, int, int]]) -> list[str]:
    """The words outside every occurrence of an option (an option's own "entrambi" says nothing of the reply)."""
    return [w for j, w in enumerate(words.words) if not any(s <= j < e for s, e, _i in found)]


def _exact(candidates: Sequence[str], options: Sequence[str]) -> int | None:
    """The option one of the candidates equals (normalised), if any."""
    for candidate in candidates:
        text = normalize(candidate)
        for i, option in enumerate(options):
            if text and text == normalize(option):
                return i
    return None


def match_option_rule(answer: str, options: Sequence[str]) -> tuple[int | None, str]:
    """(index, rule) of the one option the answer gives, or (None, reason): module docstring."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: len(options)]
    lines = _lines(answer)
    whole = _exact(lines, options) if len(lines) == 1 else None
    if whole is not None:  # the whole reply is one option, even one that looks like an option line ("E. coli")
        return whole, "exact"
    if _echo(lines, letters, options):
        return None, "echo"
    rest = []
    for line in lines:
        labelled = _label(line, letters)
        if labelled is not None and _label_contradicts(labelled[1], letters.index(labelled[0]), options):
            return None, "label_contradicts_text"
        rest.append(line if labelled is None else labelled[1])
    text = "\n".join(rest)
    first = rest[0] if rest else ""
    segment = _SEGMENT_END.split(first.strip().lstrip(_EDGE_PUNCT), maxsplit=1)[0]
    # The whole answer after its label: one option, whatever words the option holds ("... di entrambi ...").
    whole = _exact((text,), options)
    if whole is not None:
        return whole, "exact"
    exact = _exact((segment, segment.rsplit(":", 1)[-1]), options)  # "Risposta: Si": what follows the cue
    words = _words(text)
    found = _occurrences(words, options)
    named = _Named([i for s, e, i in found if not words.negated(s, e)], {i for s, e, i in found if words.negated(s, e)})
    if exact is not None:
        named.positive.insert(0, exact)
    index, reason = _verdict(named, _uncovered(words, found))
    if index is None:
        return None, reason or "no_option"
    at_start = bool(found) and min(found)[0] == 0 and min(found)[2] == index
    return index, "exact" if exact == index else "start" if at_start else "in_text"

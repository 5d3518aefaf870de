"""KIND / NERMuD 2023 token-per-line IOB files -> one record per sentence.

Reads ``{ADG,FIC,WN}_{train,dev,test}.tsv`` (``token<TAB>label``, an empty line
between sentences). The ``*_test_nolabel.tsv`` files are not read: they are the
test tokens without labels, which ``*_test.tsv`` already holds.

A sentence's ``text`` is rebuilt from its tokens by :func:`detok.detokenize`;
each entity's ``entity_text`` is the slice of ``text`` from its first token's
start to its last token's end, so it is always an exact substring.

IOB2 repair (counted in the report): an ``I-X`` that does not follow ``B-X`` or
``I-X`` starts a new entity, as if it were ``B-X`` (WN_test has 16). Any label
other than ``O``, ``B-``/``I-`` + PER/LOC/ORG is an error naming file and line.

Splits per domain: ``<d>/train``, ``<d>/dev``, ``<d>/test`` as in the files,
and ``<d>/trial``: 5 dev sentences with at least one entity, drawn with
:func:`common.seeded_sample` (salt ``ner/<d>/trial``); they stay in dev too, so
dev keeps the paper's counts.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate, compress, count
from typing import Callable, Iterator

from ..errors import MissingSource, SourceError
from ..building.rawsource import RawSource
from ..building.conversion_report import ConversionReport
from .common import gc_paused, read_lines, seeded_sample
from .detok import separators

DOMAINS = ("adg", "fic", "wn")
TYPES = ("PER", "LOC", "ORG")
LABELS = {"O"} | {f"{p}-{t}" for p in "BI" for t in TYPES}
TRIAL_SIZE = 5
# The trial split is part of the benchmark: drawn with a fixed seed, never --seed (which only
# changes FAQ distractors and AT letters, see docs/converters-constructed.md).
TRIAL_SEED = 0
REPAIR_I = "I- label not preceded by B-/I- of the same type, read as B-"


def file_name(domain: str, split: str) -> str:
    return f"{domain.upper()}_{split}.tsv"


def _line_problem(line: str) -> str | None:
    """What is wrong with one non-empty line, or None."""
    fields = line.split("\t")
    if len(fields) != 2:
        return f"expected 2 TAB-separated fields (token, label), found {len(fields)}"
    token, label = fields
    if not token or token != "".join(token.split()):
        return f"token {token!r} is empty or holds whitespace; expected one token"
    if label not in LABELS:
        return f"label is {label!r}; expected one of {sorted(LABELS)}"
    return None


# Runs of empty lines end sentences; a line with two TABs or more is a bad line.
SENTENCE_BREAK = re.compile("\n\n+")
TWO_TABS = re.compile("\t[^\t\n]*\t")


def _columns(lines: list[str]) -> tuple[list[str], list[str], list[int]] | None:
    """The tokens, the labels and each sentence's first token index; None if any line has a problem.

    Whole-file operations instead of a split and three checks per line: the non-empty lines
    hold as many TABs as there are of them and none holds two (so each holds one), and the
    labels and the tokens are checked all at once.
    """
    if not any(lines):
        return [], [], []
    sentences = SENTENCE_BREAK.split("\n".join(lines).strip("\n"))
    body = "\n".join(sentences)  # the non-empty lines
    if body.count("\t") != body.count("\n") + 1 or TWO_TABS.search(body):
        return None
    cells = body.replace("\n", "\t").split("\t")
    tokens, labels = cells[0::2], cells[1::2]
    if not set(labels) <= LABELS or tokens.count(""):
        return None
    joined = "".join(tokens)
    if joined != "".join(joined.split()):
        return None  # some token holds whitespace
    starts = list(accumulate((s.count("\n") + 1 for s in sentences), initial=0))[:-1]
    return tokens, labels, starts


def _entities(labels: list[str], starts: list[int], pieces: list[str], where: Callable[[int], str],
              report: ConversionReport) -> dict[int, list[dict]]:
    """The entities of each sentence (by its index) that has any.

    ``pieces``: each token's separator then the token (``pieces[2 * i + 1]`` is token i), so
    an entity's text, from its first token to its last, is a join of a slice.
    """
    found: dict[int, list[dict]] = {}
    entity: dict = {}
    first = last = 0
    sentence_starts = set(starts)
    for i in [i for i, label in enumerate(labels) if label != "O"]:  # the few tokens in an entity
        prefix, etype = labels[i][0], labels[i][2:]
        if prefix == "I":
            if labels[i - 1][2:] == etype and i not in sentence_starts:  # the open entity goes on
                last = i
                continue
            report.repair(REPAIR_I, where(i))
        if entity:
            entity["entity_text"] = "".join(pieces[2 * first + 1:2 * last + 2])
        first = last = i
        entity = {"entity_text": "", "type": etype}
        found.setdefault(bisect_right(starts, i) - 1, []).append(entity)
    if entity:
        entity["entity_text"] = "".join(pieces[2 * first + 1:2 * last + 2])
    return found


def _sentences(lines: list[str], name: str, report: ConversionReport) -> tuple[list[str], dict[int, list[dict]]] | None:
    """The texts of the sentences and the entities of those that have any; None if a line has a problem."""
    columns = _columns(lines)
    if columns is None:
        return None
    tokens, labels, starts = columns
    if not tokens:
        return [], {}
    seps = separators(tokens, starts)
    for s in starts[1:]:
        seps[s] = "\n"  # tokens hold no whitespace: line breaks split the sentences apart
    pieces = [""] * (2 * len(tokens))
    pieces[0::2], pieces[1::2] = seps, tokens
    linenos: list[int] = []

    def where(i: int) -> str:  # "file:line" of token i, for the few repairs
        linenos[:] = linenos or compress(count(1), lines)
        return f"{name}:{linenos[i]}"

    entities = _entities(labels, starts, pieces, where, report) if labels.count("O") != len(labels) else {}
    return "".join(pieces).split("\n"), entities


def read_sentences(source: RawSource, name: str, report: ConversionReport) -> Iterator[dict]:
    """One record per sentence: a run of non-empty lines, any number of empty lines between.

    A bad line raises when its sentence is reached, after the records of the sentences before it.
    The whole file is read at once: its sentences end to end, then split into records. (This
    module's docstring is quoted in the dataset card: the rules are those of ``detokenize``,
    applied here by :func:`detok.separators` once per file.)
    """
    lines = read_lines(source, name)
    with gc_paused():
        parsed, error = _sentences(lines, name, report), None
    if parsed is None:
        bad, problem = next((n, p) for n, line in enumerate(lines, 1) if line and (p := _line_problem(line)))
        error = SourceError(source.root / name, bad, problem)
        first = bad - 1  # the first line of the bad line's sentence (index)
        while first and lines[first - 1]:
            first -= 1
        with gc_paused():
            parsed = _sentences(lines[:first], name, report)
        assert parsed is not None
    texts, entities = parsed
    for k, text in enumerate(texts):
        yield {"text": text, "entities": entities.get(k, [])}
    if error is not None:
        raise error


def convert(source: RawSource, report: ConversionReport, seed: int) -> Iterator[tuple[str, dict]]:
    needed = [file_name(d, s) for d in DOMAINS for s in ("train", "dev")]
    absent = [n for n in needed if not source.exists(n)]
    if absent:
        raise MissingSource(absent)
    for domain in DOMAINS:
        for rec in read_sentences(source, file_name(domain, "train"), report):
            yield f"{domain}/train", rec
        dev = list(read_sentences(source, file_name(domain, "dev"), report))
        yield from ((f"{domain}/dev", rec) for rec in dev)
        with_entities = [rec for rec in dev if rec["entities"]]
        if len(with_entities) < TRIAL_SIZE:
            raise SourceError(source.root / file_name(domain, "dev"), None,
                              f"{len(with_entities)} sentences with entities; expected at least {TRIAL_SIZE} to draw "
                              "the trial split")
        for i in seeded_sample(len(with_entities), TRIAL_SIZE, TRIAL_SEED, f"ner/{domain}/trial"):
            yield f"{domain}/trial", with_entities[i]
        test = file_name(domain, "test")
        if source.exists(test):
            for rec in read_sentences(source, test, report):
                yield f"{domain}/test", rec
        else:
            report.missing_part([test], [f"{domain}/test"])

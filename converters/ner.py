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

from itertools import repeat
from typing import Iterator

from ..errors import MissingSource, SourceError
from ..rawsource import RawSource
from ..report import ConversionReport
from .common import read_lines, seeded_sample
from .detok import join_tokens, token_spans

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


def sentence_record(linenos: list[int], tokens: list[str], labels: list[str], name: str, report: ConversionReport) -> dict:
    """One record from a sentence's line numbers, tokens and labels."""
    pieces = join_tokens(tokens)
    text = "".join(pieces)
    entities: list[dict] = []
    if labels.count("O") == len(labels):  # many sentences: no spans needed
        return {"text": text, "entities": entities}
    spans = token_spans(pieces, tokens)
    open_type: str | None = None
    start = 0
    for lineno, label, (tok_start, tok_end) in zip(linenos, labels, spans):
        if label == "O":  # most tokens: closes any open entity
            open_type = None
            continue
        prefix, _, etype = label.partition("-")
        if prefix == "I" and etype != open_type:
            report.repair(REPAIR_I, f"{name}:{lineno}")
            prefix = "B"
        if prefix == "I":
            entities[-1]["entity_text"] = text[start:tok_end]
            continue
        open_type = etype
        start = tok_start
        entities.append({"entity_text": text[tok_start:tok_end], "type": etype})
    return {"text": text, "entities": entities}


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


def _columns(lines: list[str]) -> tuple[list[int], list[str], list[str]] | None:
    """(line number, token, label) columns of the non-empty lines; None if any line has a problem.

    Whole-file operations instead of a split and three checks per line: every non-empty
    line holds exactly one TAB, and the distinct tokens and labels are checked once each.
    """
    if list(map(str.count, lines, repeat("\t"))).count(1) + lines.count("") != len(lines):
        return None
    linenos = [n for n, line in enumerate(lines, 1) if line]
    if not linenos:
        return [], [], []
    cells = "\t".join([lines[n - 1] for n in linenos]).split("\t")
    tokens, labels = cells[0::2], cells[1::2]
    if not set(labels) <= LABELS or not all(t and t == "".join(t.split()) for t in set(tokens)):
        return None
    return linenos, tokens, labels


def read_sentences(source: RawSource, name: str, report: ConversionReport) -> Iterator[dict]:
    """One record per sentence: a run of non-empty lines, any number of empty lines between.

    A bad line raises when its sentence is reached, after the records of the sentences before it.
    """
    lines = read_lines(source, name)
    columns, error = _columns(lines), None
    if columns is None:
        bad, problem = next((n, p) for n, line in enumerate(lines, 1) if line and (p := _line_problem(line)))
        error = SourceError(source.root / name, bad, problem)
        first = bad - 1  # the first line of the bad line's sentence (index)
        while first and lines[first - 1]:
            first -= 1
        columns = _columns(lines[:first])
        assert columns is not None
    linenos, tokens, labels = columns
    # A sentence starts where the line numbers jump over empty lines.
    starts = [0] + [k for k, (a, b) in enumerate(zip(linenos, linenos[1:]), 1) if b - a != 1]
    for a, b in zip(starts, starts[1:] + [len(linenos)]):
        if a < b:
            yield sentence_record(linenos[a:b], tokens[a:b], labels[a:b], name, report)
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
                              f"{len(with_entities)} sentences with entities; expected at least {TRIAL_SIZE} to draw the trial split")
        for i in seeded_sample(len(with_entities), TRIAL_SIZE, TRIAL_SEED, f"ner/{domain}/trial"):
            yield f"{domain}/trial", with_entities[i]
        test = file_name(domain, "test")
        if source.exists(test):
            for rec in read_sentences(source, test, report):
                yield f"{domain}/test", rec
        else:
            report.missing_part([test], [f"{domain}/test"])

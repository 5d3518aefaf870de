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

from typing import Iterator

from ..errors import MissingSource, SourceError
from ..rawsource import RawSource
from ..report import ConversionReport
from .common import iter_blocks, seeded_sample
from .detok import detokenize

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


def sentence_record(rows: list[tuple[int, str, str]], name: str, report: ConversionReport) -> dict:
    """One record from a sentence's (line number, token, label) rows."""
    text, spans = detokenize([token for _, token, _ in rows])
    entities: list[dict] = []
    open_type: str | None = None
    start = 0
    for (lineno, _, label), (tok_start, tok_end) in zip(rows, spans):
        prefix, _, etype = label.partition("-")
        if prefix == "I" and etype != open_type:
            report.repair(REPAIR_I, f"{name}:{lineno}")
            prefix = "B"
        if prefix == "I":
            entities[-1]["entity_text"] = text[start:tok_end]
            continue
        open_type = etype if prefix == "B" else None
        if prefix == "B":
            start = tok_start
            entities.append({"entity_text": text[tok_start:tok_end], "type": etype})
    return {"text": text, "entities": entities}


def read_sentences(source: RawSource, name: str, report: ConversionReport) -> Iterator[dict]:
    path = source.root / name
    for block in iter_blocks(source, name):
        rows = []
        for lineno, line in block:
            fields = line.split("\t")
            if len(fields) != 2:
                raise SourceError(path, lineno, f"expected 2 TAB-separated fields (token, label), found {len(fields)}")
            token, label = fields
            if not token or token != "".join(token.split()):
                raise SourceError(path, lineno, f"token {token!r} is empty or holds whitespace; expected one token")
            if label not in LABELS:
                raise SourceError(path, lineno, f"label is {label!r}; expected one of {sorted(LABELS)}")
            rows.append((lineno, token, label))
        yield sentence_record(rows, name, report)


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

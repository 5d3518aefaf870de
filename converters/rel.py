"""CLinkaRT (E3C) PubTator documents + tokenised sentences -> one record per sentence.

Per part (``training`` -> train, ``test`` -> test) two inputs:

- ``<part>.txt`` (PubTator): per document ``<docid>|t|<text>``, then relation
  lines ``<docid> TAB REL TAB <rml_start>-<rml_end> TAB <event_start>-<event_end>``
  optionally followed by ``TAB <rml_text> TAB <event_text>``; empty lines
  between documents. Offsets are characters into the text, end exclusive.
- ``<part>_tokenized/<docid>.tsv``: ``<sent>-<tok> TAB <start>-<end> TAB <token>``,
  an empty line between sentences. These are the official sentence boundaries:
  a sentence is ``text[first token start : last token end]``.

Every record is one sentence, in document then sentence order, with its
relations ``[[RML text, EVENT text], ...]`` sorted by (RML offsets, EVENT
offsets); sentences without relations are kept as negatives. A relation whose
mentions lie in different sentences (or outside every sentence) is dropped,
counted in the report with its document id, never glued across sentences. An
offset outside the document, a given text that differs from the slice, or a
token that differs from its slice is an error naming file, line and document.

Splits: ``train`` (every training sentence), ``trial`` = 5 training sentences
with at least one relation, drawn by :func:`common.seeded_sample` (salt
``rel/trial``; they stay in train), and ``test`` when ``test.txt`` and
``test_tokenized/`` are present (the test set is not public).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator

from ..errors import MissingSource, SourceError
from ..building.rawsource import RawSource
from ..building.conversion_report import ConversionReport
from .common import iter_blocks, parse_span, seeded_sample

TRIAL_SIZE = 5
# The trial split is part of the benchmark: drawn with a fixed seed, never --seed (which only
# changes FAQ distractors and AT letters, see docs/converters-constructed.md).
TRIAL_SEED = 0
PARTS = {"train": "training", "test": "test"}
DOCID = re.compile(r"[A-Za-z0-9_.-]+")
SENT_TOK = re.compile(r"(\d+)-(\d+)", re.ASCII)
CROSS = "relation whose RML and EVENT are in different sentences"
OUTSIDE = "relation with a mention not inside one sentence"

Span = tuple[int, int]


@dataclass
class Relation:
    lineno: int
    rml: Span
    event: Span


@dataclass
class Document:
    docid: str
    lineno: int
    text: str
    relations: list[Relation] = field(default_factory=list)


def _span_in(text: str, value: str, path: object, lineno: int, docid: str, what: str) -> Span:
    start, end = parse_span(value, path, lineno, f"document {docid}: {what} offsets")
    if end > len(text):
        raise SourceError(path, lineno, f"document {docid}: {what} offsets {start}-{end} are outside the document "
                                        f"(length {len(text)})")
    return start, end


def read_documents(source: RawSource, name: str) -> list[Document]:
    path = source.root / name
    docs: list[Document] = []
    seen: set[str] = set()
    for block in iter_blocks(source, name):
        lineno, head = block[0]
        docid, sep, text = head.partition("|t|")
        if not sep or not DOCID.fullmatch(docid):
            raise SourceError(path, lineno, "expected '<docid>|t|<text>' with a docid of letters, digits, '_', '.', "
                                            f"'-'; found {head[:60]!r}")
        if docid in seen:
            raise SourceError(path, lineno, f"document {docid} appears twice")
        seen.add(docid)
        doc = Document(docid, lineno, text)
        for rel_lineno, line in block[1:]:
            fields = line.split("\t")
            if len(fields) not in (4, 6) or fields[0] != docid or fields[1] != "REL":
                raise SourceError(path, rel_lineno,
                                  f"document {docid}: expected '{docid} TAB REL TAB <start>-<end> TAB <start>-<end>' "
                                  f"and optionally TAB <rml text> TAB <event text>; found {len(fields)} fields "
                                  f"{fields[:2]}")
            rml = _span_in(text, fields[2], path, rel_lineno, docid, "RML")
            event = _span_in(text, fields[3], path, rel_lineno, docid, "EVENT")
            for what, (start, end) in (("RML", rml), ("EVENT", event)):
                if text[start:end] != text[start:end].strip():
                    raise SourceError(path, rel_lineno, f"document {docid}: {what} offsets {start}-{end} hold "
                                                        f"{text[start:end]!r}; expected a mention without surrounding "
                                                        "whitespace")
            for what, (start, end), given in zip(("RML", "EVENT"), (rml, event), fields[4:]):
                if text[start:end] != given:
                    raise SourceError(path, rel_lineno, f"document {docid}: {what} text is {given!r} but offsets "
                                                        f"{start}-{end} hold {text[start:end]!r}")
            doc.relations.append(Relation(rel_lineno, rml, event))
        docs.append(doc)
    return docs


def read_sentence_spans(source: RawSource, name: str, doc: Document) -> list[Span]:
    """(start, end) of every sentence of ``doc`` from its tokenised file, checked against the text."""
    path = source.root / name
    spans: list[Span] = []
    for block in iter_blocks(source, name):
        sent_no, first, last = None, 0, 0
        for lineno, line in block:
            fields = line.split("\t")
            if len(fields) != 3:
                raise SourceError(path, lineno, f"document {doc.docid}: expected 3 TAB-separated fields (<sent>-<tok>, "
                                                f"<start>-<end>, token), found {len(fields)}")
            number = SENT_TOK.fullmatch(fields[0])
            if not number:
                raise SourceError(path, lineno,
                                  f"document {doc.docid}: token number is {fields[0]!r}; expected <sent>-<tok>")
            start, end = _span_in(doc.text, fields[1], path, lineno, doc.docid, "token")
            if doc.text[start:end] != fields[2]:
                raise SourceError(path, lineno, f"document {doc.docid}: token is {fields[2]!r} but offsets "
                                                f"{start}-{end} hold {doc.text[start:end]!r}")
            if sent_no is None:
                sent_no, first = number[1], start
            elif number[1] != sent_no:
                raise SourceError(path, lineno, f"document {doc.docid}: token of sentence {number[1]} inside sentence "
                                                f"{sent_no}; expected an empty line between sentences")
            elif start < last:
                raise SourceError(path, lineno, f"document {doc.docid}: token starts at {start}, before the previous "
                                                f"token ends ({last})")
            last = end
        if spans and first < spans[-1][1]:
            raise SourceError(path, block[0][0], f"document {doc.docid}: sentence starts at {first}, before the "
                                                 f"previous sentence ends ({spans[-1][1]})")
        spans.append((first, last))
    return spans


def _sentence_of(spans: list[Span], mention: Span) -> int | None:
    for i, (start, end) in enumerate(spans):
        if start <= mention[0] and mention[1] <= end:
            return i
    return None


def sentence_records(doc: Document, spans: list[Span], report: ConversionReport) -> list[dict]:
    """One record per sentence; relations not inside one sentence are dropped and counted."""
    by_sentence: list[list[Relation]] = [[] for _ in spans]
    for rel in doc.relations:
        rml_at, event_at = _sentence_of(spans, rel.rml), _sentence_of(spans, rel.event)
        if rml_at is None or event_at is None:
            report.drop(OUTSIDE, f"document {doc.docid}, line {rel.lineno}")
        elif rml_at != event_at:
            report.drop(CROSS, f"document {doc.docid}, line {rel.lineno}")
        else:
            by_sentence[rml_at].append(rel)
    records = []
    for (start, end), rels in zip(spans, by_sentence):
        rels.sort(key=lambda r: (r.rml, r.event))
        records.append({
            "text": doc.text[start:end],
            "relations": [[doc.text[slice(*r.rml)], doc.text[slice(*r.event)]] for r in rels],
        })
    return records


def read_part(source: RawSource, part: str, report: ConversionReport) -> list[dict]:
    """Every sentence record of ``<part>.txt`` with ``<part>_tokenized/``, documents in file order."""
    docs = read_documents(source, f"{part}.txt")
    folder = f"{part}_tokenized"
    known = {doc.docid for doc in docs}
    orphans = [n for n in source.glob(f"{folder}/*.tsv") if n[len(folder) + 1:-4] not in known]
    if orphans:
        raise SourceError(source.root / orphans[0], None,
                          f"no document with this id in {part}.txt ({len(orphans)} such files)")
    records: list[dict] = []
    unplaced: Counter = Counter()
    for doc in docs:
        name = f"{folder}/{doc.docid}.tsv"
        if not source.exists(name):
            raise SourceError(source.root / name, None,
                              f"document {doc.docid} of {part}.txt (line {doc.lineno}) has no tokenised file")
        before = report.dropped[CROSS] + report.dropped[OUTSIDE]
        records.extend(sentence_records(doc, read_sentence_spans(source, name, doc), report))
        dropped = report.dropped[CROSS] + report.dropped[OUTSIDE] - before
        if dropped:
            unplaced[doc.docid] = dropped
    report.note(f"{part}: relations not inside one sentence, by document", dict(sorted(unplaced.items())))
    report.note(f"{part}: documents / relations", [len(docs), sum(len(d.relations) for d in docs)])
    return records


def convert(source: RawSource, report: ConversionReport, seed: int) -> Iterator[tuple[str, dict]]:
    if not source.exists("training.txt"):
        raise MissingSource(["training.txt", "training_tokenized/"],
                            "Put training.txt and training_tokenized/ of the CLinkaRT training release (v1.1) in "
                            "raw/rel/.")
    train = read_part(source, PARTS["train"], report)
    yield from (("train", rec) for rec in train)
    with_relations = [rec for rec in train if rec["relations"]]
    if len(with_relations) < TRIAL_SIZE:
        raise SourceError(source.root / "training.txt", None,
                          f"{len(with_relations)} sentences with relations; expected at least {TRIAL_SIZE} to draw the "
                          "trial split")
    for i in seeded_sample(len(with_relations), TRIAL_SIZE, TRIAL_SEED, "rel/trial"):
        yield "trial", with_relations[i]
    if source.exists("test.txt"):
        yield from (("test", rec) for rec in read_part(source, PARTS["test"], report))
    else:
        report.missing_part(["test.txt", "test_tokenized/<docid>.tsv"], ["test"])

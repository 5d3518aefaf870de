"""QA4FAQ knowledge base -> 4-way multiple choice (one item per FAQ).

Reads ``faqs_uft8_QA.csv`` (``;``-separated, CRLF, header ``id;question;answer;tag``,
RFC 4180 quoting with multi-line fields) and, when present, checks that
``faqs_uft8_QA.xml`` holds the same FAQs in the same order with identical values.

Texts: line breaks inside a question or answer are written as LF (the source has
CRLF) and surrounding whitespace is removed; both are counted as repairs.

Construction (see docs/converters-constructed.md):
- split: ``dev`` = 5 FAQs drawn with the fixed ``SPLIT_SEED`` (never ``--seed``, so
  the few-shot set is stable); ``test`` = every other FAQ. Source order in each split.
- options: the FAQ's own answer is the correct option; three distractors are drawn
  without replacement from the distinct answer texts of the other FAQs (compared
  with :func:`option_key`), so no item holds two equal options and a FAQ never gets
  the answer it shares with another FAQ (191 and 195) as a distractor.
- correct letter: balanced over A-D within each split (counts differ by at most 1).
Options and letters depend on the task seed only.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterator, NamedTuple

from ..errors import MissingSource, SourceError
from ..building.rawsource import RawSource
from ..building.conversion_report import ConversionReport
from .common import (balanced_positions, clean_text, iter_csv, option_key, parse_xml, place_at, require_text,
                     seeded_rng, seeded_split)

CSV_NAME = "faqs_uft8_QA.csv"
XML_NAME = "faqs_uft8_QA.xml"
HEADER = ["id", "question", "answer", "tag"]
LETTERS = ["A", "B", "C", "D"]
DEV_SIZE = 5
SPLIT_SEED = 2016


class Faq(NamedTuple):
    id: str
    question: str
    answer: str
    tag: str


def read_csv(source: RawSource) -> list[tuple[int, Faq]]:
    """(line number, FAQ) for every record of the CSV, fields as in the file."""
    path = source.root / CSV_NAME
    out: list[tuple[int, Faq]] = []
    seen: set[str] = set()
    for lineno, row in iter_csv(source, CSV_NAME, delimiter=";"):
        if lineno == 1:
            if row != HEADER:
                raise SourceError(path, 1, f"header is {row}; expected {';'.join(HEADER)}")
            continue
        if len(row) != len(HEADER):
            raise SourceError(path, lineno, f"{len(row)} fields; expected {len(HEADER)} ({';'.join(HEADER)})")
        faq = Faq(*row)
        if not faq.id.isdigit():
            raise SourceError(path, lineno, f"id is {faq.id!r}; expected digits")
        if faq.id in seen:
            raise SourceError(path, lineno, f"duplicate id {faq.id}")
        seen.add(faq.id)
        require_text(faq.question, path, lineno, "question")
        require_text(faq.answer, path, lineno, "answer")
        out.append((lineno, faq))
    if not out:
        raise SourceError(path, None, "no FAQ records after the header")
    return out


def check_xml(source: RawSource, faqs: list[Faq]) -> None:
    """The XML knowledge base must hold the CSV's FAQs, in order, with identical fields."""
    path = source.root / XML_NAME
    elems = list(parse_xml(source, XML_NAME).iter("faq"))
    if len(elems) != len(faqs):
        raise SourceError(path, None, f"{len(elems)} <faq> elements, but {CSV_NAME} has {len(faqs)} records; expected "
                                      "the same FAQs")
    for n, (elem, faq) in enumerate(zip(elems, faqs), 1):
        values = []
        for field in HEADER:
            child = elem.find(field)
            if child is None:
                raise SourceError(path, f"<faq> {n}", f"no <{field}>; expected <id>, <question>, <answer>, <tag>")
            values.append("".join(child.itertext()))
        for field, xml_value, csv_value in zip(HEADER, values, faq):
            if xml_value != csv_value:
                raise SourceError(path, f"<faq> {n}, id={values[0]}",
                                  f"{field} differs from {CSV_NAME} (id={faq.id}): {xml_value[:60]!r} vs "
                                  f"{csv_value[:60]!r}; expected identical values")


def convert(source: RawSource, report: ConversionReport, seed: int) -> Iterator[tuple[str, dict]]:
    if not source.exists(CSV_NAME):
        raise MissingSource([CSV_NAME, XML_NAME])
    path = source.root / CSV_NAME
    lined = read_csv(source)
    faqs = [faq for _, faq in lined]
    if source.exists(XML_NAME):
        check_xml(source, faqs)
        report.note("csv/xml agreement", f"{XML_NAME} holds the same {len(faqs)} FAQs with identical fields")
    else:
        report.note("csv/xml agreement", f"{XML_NAME} absent: not cross-checked")

    questions = {f.id: clean_text(f.question, report, f"id={f.id} question") for f in faqs}
    answers = {f.id: clean_text(f.answer, report, f"id={f.id} answer") for f in faqs}
    # Distinct answer texts, first spelling kept, in source order.
    distinct: dict[str, str] = {}
    for f in faqs:
        distinct.setdefault(option_key(answers[f.id]), answers[f.id])
    shared = Counter(option_key(a) for a in answers.values())
    groups = [[f.id for f in faqs if option_key(answers[f.id]) == key] for key, n in shared.items() if n > 1]
    if len(distinct) < len(LETTERS):
        raise SourceError(path, None, f"only {len(distinct)} distinct answer texts; expected at least {len(LETTERS)} "
                                      "to build 4 options")
    if len(faqs) <= DEV_SIZE:
        raise SourceError(path, None,
                          f"{len(faqs)} FAQs; expected more than {DEV_SIZE} ({DEV_SIZE} go to the few-shot dev split)")

    split_of = seeded_split([f.id for f in faqs], {"dev": DEV_SIZE}, seeded_rng("faq-split", SPLIT_SEED))
    by_split = {s: [f for f in faqs if split_of.get(f.id, "test") == s] for s in ("dev", "test")}
    letters: dict[str, Counter] = {}
    for split, items in by_split.items():
        positions = balanced_positions(len(items), len(LETTERS), seeded_rng("faq-letters", seed, split))
        letters[split] = Counter(LETTERS[p] for p in positions)
        for faq, pos in zip(items, positions):
            own = option_key(answers[faq.id])
            pool = [text for key, text in distinct.items() if key != own]
            options = place_at(seeded_rng("faq-distractors", seed, faq.id).sample(pool, len(LETTERS) - 1), pos,
                               answers[faq.id])
            yield split, {"id": faq.id, "question": questions[faq.id], "correct_answer": LETTERS[pos],
                          **dict(zip(LETTERS, options))}

    report.note("construction", (
        "One item per FAQ: its question; its own answer as the correct option; 3 distractors drawn without replacement "
        "from the distinct answer texts of the other FAQs (whitespace/case-insensitive), so no item repeats an option "
        "and FAQs sharing an answer text are never each other's distractors. The correct letter is balanced over A-D "
        f"within each split. dev = {DEV_SIZE} FAQs drawn with split seed {SPLIT_SEED} (independent of --seed); test = "
        "all other FAQs. Distractors and letters use the task seed."
    ))
    report.note("construction seed", seed)
    report.note("split seed", SPLIT_SEED)
    report.note("correct letter counts", {s: dict(sorted(c.items())) for s, c in letters.items()})
    report.note("FAQs sharing one answer text (never each other's distractor)", groups)

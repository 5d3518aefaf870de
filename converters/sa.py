"""SENTIPOLC 2016 CSV files.

Train: a standard CSV (RFC 4180 quote doubling) with a header. Test: the
``sentipolc16_gold2000_text.csv`` lines are not valid CSV (inner quotes are
backslash-escaped, never doubled), so each line is matched against the one
shape every line has, and the text is unescaped by one documented rule:
``\\"`` -> ``\\`` + ``"`` and ``\\"`` alone -> ``"`` (this yields the same ``\\"``
that the train texts hold where the source had an escaped quote). Labels are
checked against ``sentipolc16_gold2000.csv``, the official gold, when present.
HTML entities, mentions and URLs are kept as in the source.
"""

from __future__ import annotations

import csv
import re
from typing import Iterator

from ..errors import MissingSource, SourceError
from ..building.rawsource import RawSource
from ..building.conversion_report import ConversionReport
from .common import iter_lines, require_text

TRAIN = "sentipolc16_officialdistrib_train.csv"
TEST_TEXT = "sentipolc16_gold2000_text.csv"
TEST_GOLD = "sentipolc16_gold2000.csv"
LABELS = ["subj", "opos", "oneg", "iro", "lpos", "lneg", "top"]
HEADER = ["idtwitter", *LABELS, "text"]
_TEST_LINE = re.compile(r'^"(\d+)","([01])","([01])","([01])","([01])","([01])","([01])","([0-3])","(.*)"$')
_GOLD_LINE = re.compile(r'^"(\d+)","([01])","([01])","([01])","([01])","([01])","([01])","([0-3])"$')
_ESCAPED_QUOTE = re.compile(r'\\(\\?")')
_BIT = {"0", "1"}


def unescape_test_text(text: str) -> str:
    return _ESCAPED_QUOTE.sub(lambda m: m.group(1), text)


def _record(values: list[str], text: str) -> dict:
    return {"idtwitter": values[0], **dict(zip(LABELS, values[1:8])), "text": text}


def _train(source: RawSource) -> Iterator[dict]:
    path = source.root / TRAIN
    with source.open_text(TRAIN) as fh:
        reader = csv.reader(fh, strict=True)
        try:
            header = next(reader, None)
            if header != HEADER:
                raise SourceError(path, 1, f"header is {header}; expected {HEADER}")
            for row in reader:
                lineno = reader.line_num
                if len(row) != len(HEADER):
                    raise SourceError(path, lineno, f"{len(row)} fields; expected {len(HEADER)} ({', '.join(HEADER)})")
                if not row[0].isdigit():
                    raise SourceError(path, lineno, f"idtwitter is {row[0]!r}; expected digits")
                for col, value in zip(LABELS, row[1:8]):
                    allowed = {"0", "1", "2", "3"} if col == "top" else _BIT
                    if value not in allowed:
                        raise SourceError(path, lineno, f"{col} is {value!r}; expected one of {sorted(allowed)}")
                yield _record(row[:8], require_text(row[8], path, lineno, "text"))
        except csv.Error as err:
            raise SourceError(path, reader.line_num, f"malformed CSV ({err})") from None


def _gold(source: RawSource) -> dict[str, list[str]]:
    gold: dict[str, list[str]] = {}
    for lineno, line in iter_lines(source, TEST_GOLD):
        m = _GOLD_LINE.match(line)
        if not m:
            raise SourceError(source.root / TEST_GOLD, lineno,
                              'expected "id" and 7 quoted labels, e.g. "123","1","0","1","0","1","0","0"')
        if m.group(1) in gold:
            raise SourceError(source.root / TEST_GOLD, lineno, f"duplicate id {m.group(1)}")
        gold[m.group(1)] = list(m.groups()[1:])
    return gold


def _test(source: RawSource, report: ConversionReport) -> Iterator[dict]:
    path = source.root / TEST_TEXT
    gold = _gold(source) if source.exists(TEST_GOLD) else None
    if gold is None:
        report.note("test labels", f"taken from {TEST_TEXT}; {TEST_GOLD} absent, so not cross-checked")
    seen = set()
    for lineno, line in iter_lines(source, TEST_TEXT):
        m = _TEST_LINE.match(line)
        if not m:
            raise SourceError(path, lineno, 'expected "id","subj","opos","oneg","iro","lpos","lneg","top","text" with '
                                            'quoted 0/1 labels (top 0-3)')
        values = list(m.groups())
        if values[0] in seen:
            raise SourceError(path, lineno, f"duplicate id {values[0]}")
        seen.add(values[0])
        if gold is not None:
            if values[0] not in gold:
                raise SourceError(path, lineno, f"id {values[0]} is not in {TEST_GOLD}")
            if gold[values[0]] != values[1:8]:
                raise SourceError(path, lineno, f"labels {values[1:8]} differ from {TEST_GOLD} {gold[values[0]]}")
        yield _record(values[:8], require_text(unescape_test_text(values[8]), path, lineno, "text"))
    if gold is not None and set(gold) - seen:
        extra = sorted(set(gold) - seen)
        raise SourceError(source.root / TEST_GOLD, None,
                          f"{len(extra)} id(s) without text in {TEST_TEXT}, e.g. {extra[:3]}")


def convert(source: RawSource, report: ConversionReport, seed: int) -> Iterator[tuple[str, dict]]:
    if not source.exists(TRAIN) and not source.exists(TEST_TEXT):
        raise MissingSource([TRAIN, TEST_TEXT])
    if source.exists(TRAIN):
        for rec in _train(source):
            yield "train", rec
    else:
        report.missing_part([TRAIN], ["train"], "It comes with https://github.com/evalita2016/data (sentipolc/).")
    if source.exists(TEST_TEXT):
        for rec in _test(source, report):
            yield "test", rec
    else:
        report.missing_part([TEST_TEXT], ["test"], "It comes with https://github.com/evalita2016/data (sentipolc/).")

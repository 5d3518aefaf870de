"""Fanpage summarization: a fixed seeded sample of a large CSV of (article, summary) pairs.

Input: one or more ``raw/sum/*.csv`` files (read in name order as one pool), UTF-8,
RFC 4180 CSV with a header row that names a ``source`` column (the article) and a
``target`` column (the summary); other columns are ignored. Quoted fields may span
lines. A header without both columns stops the build.

Two streaming passes keep memory bounded by the number of rows (never the text):
pass 1 checks every row, skips and reports empty articles/summaries and duplicate
articles (same text after whitespace normalisation; the first is kept), and keeps
one 16-byte digest per article; then ``test`` = min(100, N - N // 10) and ``train``
= N // 10 of the N usable rows are drawn (never overlapping) with the fixed
``SAMPLE_SEED`` (``--seed`` does not change the benchmark's test set); pass 2
writes the chosen rows in source order. Rows in neither split are counted.
"""

from __future__ import annotations

import csv
import hashlib
from typing import Iterator

from ..errors import MissingSource, SourceError
from ..building.rawsource import RawSource
from ..building.conversion_report import ConversionReport
from .common import clean_text, iter_csv, seeded_rng, seeded_split

TEST_SIZE = 100
TRAIN_FRACTION = 10  # train = N // TRAIN_FRACTION
SAMPLE_SEED = 1234
# Articles can be long; the csv module's default limit (128 KiB per field) is too small.
FIELD_LIMIT = 1 << 26


def _rows(source: RawSource, name: str) -> Iterator[tuple[int, str, str]]:
    """(line, source text, target text) for every data row of one CSV."""
    path = source.root / name
    cols: tuple[int, int] | None = None
    width = 0
    for lineno, row in iter_csv(source, name):
        if cols is None:
            header = [h.lstrip("\ufeff").strip().lower() for h in row]
            if "source" not in header or "target" not in header:
                raise SourceError(path, lineno,
                                  f"header is {row}; expected a header row with columns 'source' and 'target'")
            if header.count("source") > 1 or header.count("target") > 1:
                raise SourceError(path, lineno, f"header {row} names 'source' or 'target' twice")
            cols, width = (header.index("source"), header.index("target")), len(row)
            continue
        if len(row) != width:
            raise SourceError(path, lineno, f"{len(row)} fields; expected {width} as in the header")
        yield lineno, row[cols[0]], row[cols[1]]
    if cols is None:
        raise SourceError(path, None,
                          "empty file; expected a header with 'source' and 'target' and one row per article")


def _digest(text: str) -> bytes:
    return hashlib.blake2b(" ".join(text.split()).encode("utf-8"), digest_size=16).digest()


def convert(source: RawSource, report: ConversionReport, seed: int) -> Iterator[tuple[str, dict]]:
    names = source.glob("*.csv")
    if not names:
        raise MissingSource(["*.csv (columns source,target)"])
    csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT))

    # Pass 1: which rows are usable (row numbers across all files, in order).
    first_seen: dict[bytes, str] = {}
    usable: list[int] = []
    total = 0
    for name in names:
        for lineno, article, summary in _rows(source, name):
            total += 1
            where = f"{name}:{lineno}"
            if not article.strip():
                report.drop("empty article (source)", where)
            elif not summary.strip():
                report.drop("empty summary (target)", where)
            else:
                key = _digest(article)
                if key in first_seen:
                    report.drop("duplicate article (same source text as an earlier row; the first is kept)",
                                f"{where} = {first_seen[key]}")
                else:
                    first_seen[key] = where
                    usable.append(total)
    del first_seen
    n_train = len(usable) // TRAIN_FRACTION
    n_test = min(TEST_SIZE, len(usable) - n_train)
    split_of = seeded_split(usable, {"test": n_test, "train": n_train}, seeded_rng("sum-sample", SAMPLE_SEED))

    # Pass 2: emit the sampled rows in source order.
    row = 0
    for name in names:
        for lineno, article, summary in _rows(source, name):
            row += 1
            split = split_of.get(row)
            if split is not None:
                where = f"{name}:{lineno}"
                yield split, {"source": clean_text(article, report, f"{where} source"),
                              "target": clean_text(summary, report, f"{where} target")}

    report.note("construction", (
        f"Rows of {', '.join(names)} with an empty article or summary, or a duplicate article, are skipped. Of the N "
        f"usable rows, test = min({TEST_SIZE}, N - N // {TRAIN_FRACTION}) and train = N // {TRAIN_FRACTION} (few-shot "
        f"pool) are drawn without overlap with sample seed {SAMPLE_SEED} (independent of --seed); records keep source "
        "order."
    ))
    report.note("sample seed", SAMPLE_SEED)
    report.note("rows read", total)
    report.note("usable rows", len(usable))
    report.note("usable rows in no split (not sampled)", len(usable) - n_test - n_train)

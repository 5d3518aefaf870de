"""Converter of the test task ``capitals``: one TSV row (split, id, country, A, B, answer) per record."""

import csv
from typing import Iterator

from evalita_data.errors import MissingSource, SourceError
from evalita_data.building.rawsource import RawSource
from evalita_data.building.conversion_report import ConversionReport

FILE = "capitals.tsv"


def convert(source: RawSource, report: ConversionReport, seed: int) -> Iterator[tuple[str, dict]]:
    if not source.exists(FILE):
        raise MissingSource([FILE])
    with source.open_text(FILE) as fh:
        for lineno, row in enumerate(csv.DictReader(fh, delimiter="\t"), start=2):
            if row["answer"] not in ("A", "B"):
                raise SourceError(source.root / FILE, lineno, f"answer {row['answer']!r}: expected A or B")
            rec = {k: row[k] for k in ("id", "country", "A", "B", "answer")}
            yield row["split"], rec | {"capital": row[row["answer"]]}

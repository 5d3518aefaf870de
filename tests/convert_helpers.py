"""Running a converter in tests: its records grouped by split, and its report."""

from pathlib import Path

from evalita_data.building.rawsource import RawSource
from evalita_data.building.conversion_report import ConversionReport
from evalita_data.taskspec import Converter


def run_converter(convert: Converter, folder: Path, seed: int = 0) -> tuple[dict[str, list[dict]], ConversionReport]:
    report = ConversionReport()
    out: dict[str, list[dict]] = {}
    for split, rec in convert(RawSource(folder), report, seed):
        out.setdefault(split, []).append(rec)
    return out, report

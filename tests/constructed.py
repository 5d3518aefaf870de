"""Helpers for the tests of the constructed tasks (faq, at, ls, sum)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from evalita_data.converters.common import option_key
from evalita_data.building.rawsource import RawSource
from evalita_data.registry import get_task
from evalita_data.building.conversion_report import ConversionReport
from evalita_data.schema_check import record_problems


def run_converter(task: str, task_dir: Path, seed: int) -> tuple[list[tuple[str, dict]], ConversionReport]:
    """Run a task's converter on one raw folder; every record must be valid."""
    report = ConversionReport()
    pairs = list(get_task(task).load_converter()(RawSource(task_dir), report, seed))
    for split, rec in pairs:
        assert record_problems(task, rec) == [], (split, rec)
    return pairs, report


def by_split(pairs: list[tuple[str, dict]]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for split, rec in pairs:
        out.setdefault(split, []).append(rec)
    return out


def letters_balanced(records: list[dict], field: str, letters: str) -> bool:
    counts = Counter(r[field] for r in records)
    values = [counts.get(letter, 0) for letter in letters]
    return max(values) - min(values) <= 1


def options_distinct(rec: dict, letters: str) -> bool:
    return len({option_key(rec[letter]) for letter in letters}) == len(letters)


def read_split(out: Path, task: str, split: str) -> list[dict]:
    with open(out / task / f"{split}.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]

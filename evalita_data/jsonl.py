"""The one JSON Lines format of the build: UTF-8, not ASCII-escaped, one record per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator


def dumps(record: dict) -> str:
    return json.dumps(record, ensure_ascii=False)


def write_jsonl(path: Path, records: Iterable[dict]) -> int:
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for rec in records:
            fh.write(dumps(rec))
            fh.write("\n")
            n += 1
    return n


def read_jsonl(path: Path) -> Iterator[tuple[int, object]]:
    """(line number, parsed value) pairs; a line that is not JSON raises ValueError naming it."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                raise ValueError(f"{path}:{lineno}: empty line; expected one JSON record per line")
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None

"""Reading older record formats: each version's document is brought to the current one by an explicit step before
the schema sees it (what each step does: docs/run-record.md, "Format and version"); a newer version is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .model import FORMAT_VERSION


class RecordError(ValueError):
    """A results.json or samples file that is not a run record as documented (docs/run-record.md): one line."""


def format_version(path: Path, doc: dict) -> int:
    """The document's format version (0 where absent); a newer or malformed one is refused."""
    version = doc.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise RecordError(f"{path}: key format_version: {version!r} is not a non-negative integer")
    if version > FORMAT_VERSION:
        raise RecordError(f"{path}: key format_version: {version} is newer than this evalita-eval reads "
                          f"(up to {FORMAT_VERSION}); upgrade evalita-llm to read it")
    return version


def migrate_v0(doc: dict) -> dict:
    """Version 0 -> 1: the sections version 1 requires, empty where the older file has none."""
    return {"status": "complete", "config": {}, "data": {}, "run_id": None, "run_identity": None, **doc}


MIGRATIONS = {0: migrate_v0, 1: dict}  # version -> the step to the next one (1 -> 2: the closed schema, the same keys)


def migrate_results(path: Path, doc: dict) -> tuple[dict, int]:
    """``doc`` in the current format, and the version it was written in."""
    written = version = format_version(path, doc)
    while version < FORMAT_VERSION:
        doc = {**MIGRATIONS[version](doc), "format_version": version + 1}
        version += 1
    return doc, written


def migrate_sample(line: dict[str, Any], written: int, run_id: str | None) -> dict[str, Any]:
    """A sample line of a results.json written in version ``written``, in the current format."""
    if written == 0 and "run_id" not in line:
        return {**line, "run_id": run_id}
    return line

"""The ``Source`` class every data source is, its errors, and what the sources verified by a manifest share: files read
directly, never through the ``datasets`` cache, hashed and compared with their manifest (docs/evaluator.md, "Data are
read directly")."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TypeVar

from evalita_data.jsonl import dumps
from evalita_data.manifest import MANIFEST_FILE, ManifestError
from evalita_data.schema_check import record_problems

from .entries import TaskEntry


class DataMismatch(ValueError):
    """The data read do not have the sha256 their manifest records: refused, never evaluated."""


class HubUnreachable(FileNotFoundError):
    """The Hub cannot be reached (offline, refused, timed out) and the file is not cached."""


@dataclass(frozen=True)
class LoadedSplit:
    records: list[dict]
    sha256: str  # of the split as JSONL: the bytes read, or the records re-serialised as the build writes them
    origin: str  # the file (or Hub file) read


def canonical_sha256(records: list[dict], dump: Callable[[dict], str] = dumps) -> str:
    """sha256 of the records, one ``dump`` line each: by default as the build writes its JSONL (equal to the build
    file's hash)."""
    h = hashlib.sha256()
    for rec in records:
        h.update((dump(rec) + "\n").encode("utf-8"))
    return h.hexdigest()


def read_parquet_file(path: Path | str, origin: str) -> LoadedSplit:
    import pyarrow.parquet as pq

    try:
        records = pq.read_table(path).to_pylist()
    except Exception as err:  # noqa: BLE001 - any unreadable file is reported by name
        raise DataMismatch(f"{origin}: not a readable Parquet file ({type(err).__name__}: {err})") from None
    return LoadedSplit(records, canonical_sha256(records), origin)


class Source:
    """Where the splits of an evaluation are read; the runner and the commands use only this. Each split is read once
    (``_read``), verified (``_verify``: by sha256 against the task's ``manifest.json`` entry, ``_manifest_entry``: the
    entry or None, and where it was read, ``DataMismatch`` for a malformed manifest; else record by record) and kept.
    """

    def __init__(self) -> None:
        self._splits: dict[tuple[str, str], LoadedSplit] = {}

    @property
    def description(self) -> str:
        """What results.json and messages name as the data (a folder, ``hf://ORG``, ``hf:ORG``)."""
        raise NotImplementedError

    @property
    def folder(self) -> Path | None:
        """The local folder read, if any (a run that evaluated nothing names its unknown task folders)."""
        return None

    def has_split(self, entry: TaskEntry, split: str) -> bool:
        """Whether the split can be read. Only a missing repository or file is a missing split: an unreachable Hub
        (``HubUnreachable``) and data that differ from their manifest (``DataMismatch``) are errors of the run."""
        try:
            self.load(entry, split)
        except HubUnreachable:
            raise
        except FileNotFoundError:
            return False
        return True

    def why_missing(self, entry: TaskEntry, split: str) -> str:
        """Why ``has_split`` said no, true for this source (the run's skip message)."""
        return f"{self.description} has no split {split!r}"

    def provenance(self) -> dict:
        """What else results.json records about the data (e.g. the dataset revisions read)."""
        return {}

    def load(self, entry: TaskEntry, split: str) -> list[dict]:
        """The split's records, verified."""
        return self._loaded(entry, split).records

    def sha256(self, entry: TaskEntry, split: str) -> str:
        """sha256 of the split as read and evaluated (results.json)."""
        return self._loaded(entry, split).sha256

    def _loaded(self, entry: TaskEntry, split: str) -> LoadedSplit:
        key = (entry.name, split)
        if key not in self._splits:
            loaded = self._read(entry, split)
            self._verify(entry, split, loaded)
            self._splits[key] = loaded
        return self._splits[key]

    def _verify(self, entry: TaskEntry, split: str, loaded: LoadedSplit) -> None:
        manifest, where = self._manifest_entry(entry)
        listed = manifest.splits.get(entry.split_key(split)) if manifest is not None else None
        expected = listed.sha256 if listed is not None else None
        if expected is None and (bad := first_problem(entry, loaded.records)) is not None:
            # No manifest vouches for these bytes: every record must match the task's schema.
            raise DataMismatch(f"{loaded.origin}: record {bad[0] + 1}: {bad[1]}; without a {MANIFEST_FILE} to verify "
                               f"the data by hash, every record must match the {entry.task_id} schema: nothing was "
                               "evaluated")
        if expected is not None and expected != loaded.sha256:
            raise DataMismatch(f"{loaded.origin}: sha256 of the data read ({loaded.sha256[:12]}...) differs from "
                               f"{where} ({expected[:12]}...); the data changed after the build: build (or push) "
                               "again, nothing was evaluated")


T = TypeVar("T")


def first_problem(entry: TaskEntry, records: list[dict]) -> tuple[int, str] | None:
    """(index, its first problems) of the first record that does not match the task's JSON Schema (and its own
    checks); None when all do."""
    for i, record in enumerate(records):
        if problems := record_problems(entry.task_id, record):
            return i, "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
    return None


def vouching(read: Callable[..., T], *args: object) -> T:
    """A manifest as ``read`` reads it; a malformed one refuses the data (``DataMismatch``), it vouches for nothing."""
    try:
        return read(*args)
    except ManifestError as err:
        raise DataMismatch(f"{err}; nothing was evaluated") from None

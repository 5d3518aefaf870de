"""A local folder as a source: the output of ``evalita-data build`` (``<task>/<split>.jsonl``,
NER ``ner/<domain>/<split>.jsonl``, one ``manifest.json``) or a folder in the Hub layout
(``<task>/data/<split>.parquet`` and ``<task>/manifest.json``, as ``evalita-data push
--to-dir`` writes)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from evalita_data.jsonl import loads_strict
from evalita_data.hub.benchmark import EVAL_YAML
from evalita_data.manifest import MANIFEST_FILE, BuildManifest, BuiltTask, read_published
from evalita_data.registry import task_ids

from .base import DataMismatch, LoadedSplit, Source, read_parquet_file, vouching
from .entries import TaskEntry


class FolderSource(Source):
    def __init__(self, data_dir: str | Path) -> None:
        super().__init__()
        self.data_dir = Path(data_dir)
        check_data_folder(self.data_dir)

    @property
    def description(self) -> str:
        return str(self.data_dir)

    @property
    def folder(self) -> Path:
        return self.data_dir

    def _jsonl(self, entry: TaskEntry, split: str) -> Path:
        return self.data_dir / entry.task_id / (entry.config or "") / f"{split}.jsonl"  # NER: ner/<domain>/

    def _parquet(self, entry: TaskEntry, split: str) -> Path:
        """The split's file in a folder of the Hub layout (``push --to-dir``)."""
        return self.data_dir / entry.task_id / "data" / f"{entry.split_key(split)}.parquet"

    def has_split(self, entry: TaskEntry, split: str) -> bool:
        return self._jsonl(entry, split).is_file() or self._parquet(entry, split).is_file()

    def why_missing(self, entry: TaskEntry, split: str) -> str:
        return f"{self.description} has no split {split!r}{self._not_built(entry, split)}"

    def _read(self, entry: TaskEntry, split: str) -> LoadedSplit:
        path, parquet = self._jsonl(entry, split), self._parquet(entry, split)
        if path.is_file():
            return read_jsonl_file(path)
        if parquet.is_file():
            return read_parquet_file(parquet, str(parquet))
        raise FileNotFoundError(f"{entry.name}: no split {split!r} in {self.data_dir}{self._not_built(entry, split)}: "
                                f"expected {path} (evalita-data build) or {parquet} (Hub layout)")

    def _manifest_entry(self, entry: TaskEntry) -> tuple[BuiltTask | None, str]:
        build = self.data_dir / MANIFEST_FILE
        if build.is_file():
            return vouching(BuildManifest.read, build).tasks.get(entry.task_id), str(build)
        published = self.data_dir / entry.task_id / MANIFEST_FILE
        return (vouching(read_published, published) if published.is_file() else None), str(published)

    def _not_built(self, entry: TaskEntry, split: str) -> str:
        """Why the build has no such split, from its manifest (the test gold not public, no original at all)."""
        try:
            manifest, _ = self._manifest_entry(entry)
            build = self.data_dir / MANIFEST_FILE
            whole = vouching(BuildManifest.read, build).not_built.get(entry.task_id) if build.is_file() else None
        except DataMismatch:
            return ""
        if whole is not None and whole.message:  # the task's originals are missing: the build's words
            return f" (not built: {whole.message} See `evalita-data fetch {entry.task_id}`.)"
        for part in manifest.missing_parts() if manifest is not None else []:
            if entry.split_key(split) in (part.splits or []):
                return f" (not built: {', '.join(part.files or [])} missing. {part.hint or ''})"
        return ""


def read_jsonl_file(path: Path) -> LoadedSplit:
    """Read a split from one JSONL file: the hash is of exactly the bytes parsed."""
    data = path.read_bytes()
    records = []
    for lineno, line in enumerate(data.decode("utf-8").splitlines(), 1):
        try:
            records.append(loads_strict(line))
        except ValueError as err:
            raise DataMismatch(f"{path}:{lineno}: {getattr(err, 'msg', err)}; expected one JSON record per "
                               "line") from None
    return LoadedSplit(records, hashlib.sha256(data).hexdigest(), str(path))


def check_data_folder(folder: Path) -> None:
    """A --data folder is a build or a Hub-layout folder, not e.g. the raw originals."""
    if (folder / MANIFEST_FILE).is_file():
        return
    found = [folder / tid for tid in task_ids() if (folder / tid).is_dir()]
    # Builds and Hub layouts hold only JSONL, Parquet, cards, manifests and the Hub benchmark file
    # (eval.yaml at a repository's root); originals hold other files.
    foreign = next((p for t in found
                    for p in t.rglob("*") if p.is_file() and p.suffix not in (".jsonl", ".parquet", ".md", ".json")
                    and p != t / EVAL_YAML), None)
    if found and foreign is None:
        return
    # named: unregistered tasks?
    held = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    why = f"{foreign} is not a split file" if foreign else (f"no <task>/ folder of {', '.join(task_ids())}; it holds "
                                                            f"{', '.join(held) or 'no folder'}")
    raise FileNotFoundError(f"{folder} is not a build folder (no {MANIFEST_FILE}; {why}): --data takes the output of "
                            "`evalita-data build` (or of `push --to-dir`); raw originals must be built first")

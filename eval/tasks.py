"""Task entries of an evaluation and their data, read through ``datasets.load_dataset``.

NER is evaluated per domain: one entry per config (``ner_adg``, ``ner_fic``,
``ner_wn``), as lm-eval's ``evalita-mp_ner_<domain>`` tasks. Data come from a local
build folder (``<task>/<split>.jsonl``, NER ``ner/<domain>/<split>.jsonl``), a folder
in the Hub layout (``<task>/README.md`` declaring configs, as ``evalita-data push
--to-dir`` writes), or the Hub (``<org>/<task>``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from evalita_data.rawsource import sha256_file
from evalita_data.prompts import CompiledTask, compiled
from evalita_data.registry import get_task, task_ids, tasks
from evalita_data.taskspec import TaskSpec


@dataclass(frozen=True)
class TaskEntry:
    name: str  # "te", "ner_adg", ...
    task_id: str
    config: str | None

    @property
    def spec(self) -> TaskSpec:
        return get_task(self.task_id)

    @property
    def compiled(self) -> CompiledTask:
        return compiled(self.task_id)


def all_entries() -> list[TaskEntry]:
    return [TaskEntry(name, spec.id, config) for spec in tasks().values() for name, config in spec.entries()]


def select_entries(names: list[str] | None) -> list[TaskEntry]:
    """Entries named by task id (``ner`` = its three domains) or entry name (``ner_fic``)."""
    entries = all_entries()
    if not names:
        return entries
    chosen: list[TaskEntry] = []
    for name in names:
        hits = [e for e in entries if e.name == name or e.task_id == name]
        if not hits:
            known = sorted({e.name for e in entries} | set(task_ids()))
            raise KeyError(f"unknown task {name!r}; known: {', '.join(known)}")
        chosen += [h for h in hits if h not in chosen]
    return chosen


class DataSource:
    """Where the published splits are: a local folder (``data_dir``) or a Hub organisation."""

    def __init__(self, data_dir: str | Path | None = None, hub_org: str | None = None) -> None:
        if (data_dir is None) == (hub_org is None):
            raise ValueError("give exactly one of a data folder or a Hub organisation")
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.hub_org = hub_org
        self._cache: dict[tuple[str, str], list[dict]] = {}

    @property
    def description(self) -> str:
        return str(self.data_dir) if self.data_dir is not None else f"hf://{self.hub_org}"

    def _jsonl(self, entry: TaskEntry, split: str) -> Path | None:
        if self.data_dir is None:
            return None
        folder = self.data_dir / entry.task_id
        if entry.config:
            folder = folder / entry.config
        return folder / f"{split}.jsonl"

    def has_split(self, entry: TaskEntry, split: str) -> bool:
        path = self._jsonl(entry, split)
        if path is not None and path.is_file():
            return True
        try:
            self.load(entry, split)
        except Exception:
            return False
        return True

    def load(self, entry: TaskEntry, split: str) -> list[dict]:
        key = (entry.name, split)
        if key not in self._cache:
            self._cache[key] = self._load(entry, split)
        return self._cache[key]

    def _load(self, entry: TaskEntry, split: str) -> list[dict]:
        from datasets import load_dataset

        path = self._jsonl(entry, split)
        if path is not None and path.is_file():
            ds = load_dataset("json", data_files={split: str(path)}, split=split)
        elif self.data_dir is not None and (self.data_dir / entry.task_id / "README.md").is_file():
            ds = load_dataset(str(self.data_dir / entry.task_id), name=entry.config or "default", split=split)
        elif self.data_dir is not None:
            raise FileNotFoundError(
                f"{entry.name}: no split {split!r} in {self.data_dir}: expected {path} "
                f"(build it with `evalita-data build`) or {self.data_dir / entry.task_id / 'README.md'} (Hub layout)"
            )
        else:
            ds = load_dataset(f"{self.hub_org}/{entry.task_id}", name=entry.config or "default", split=split)
        return [dict(r) for r in ds]

    def _published_manifest(self, entry: TaskEntry) -> dict | None:
        """The manifest.json that `evalita-data push` publishes beside the data, if any."""
        import json

        if self.data_dir is not None:
            path = self.data_dir / entry.task_id / "manifest.json"
            return json.loads(path.read_text("utf-8")) if path.is_file() else None
        try:
            from huggingface_hub import hf_hub_download

            path = hf_hub_download(f"{self.hub_org}/{entry.task_id}", "manifest.json", repo_type="dataset")
        except Exception:  # no manifest in that repository, or offline: fall back to the records
            return None
        return json.loads(Path(path).read_text("utf-8"))

    def sha256(self, entry: TaskEntry, split: str) -> str:
        """sha256 of the split's JSONL as built: the file itself when local, else the value the
        published manifest.json records; without either, of the records as canonical JSON."""
        path = self._jsonl(entry, split)
        if path is not None and path.is_file():
            return sha256_file(path)
        manifest = self._published_manifest(entry)
        key = f"{entry.config}/{split}" if entry.config else split
        if manifest and key in manifest.get("splits", {}):
            return manifest["splits"][key]["sha256"]
        import json

        h = hashlib.sha256()
        for rec in self.load(entry, split):
            h.update(json.dumps(rec, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
        return h.hexdigest()

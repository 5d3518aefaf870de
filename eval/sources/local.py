"""Task entries of an evaluation and their data, read directly and verified against their manifest.

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

from evalita_data.jsonl import dumps, loads_strict
from evalita_data.safepaths import UnsafePath, check_hub_name
from evalita_data.prompts import CompiledTask
from evalita_data.registry import compiled, get_task, task_ids, tasks
from evalita_data.schema_check import record_problems
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


class DataMismatch(ValueError):
    """The data read do not have the sha256 their manifest records: refused, never evaluated."""


class HubUnreachable(FileNotFoundError):
    """The Hub cannot be reached (offline, refused, timed out) and the file is not cached."""


@dataclass(frozen=True)
class LoadedSplit:
    records: list[dict]
    sha256: str  # of the split as JSONL: the bytes read, or the records re-serialised as the build writes them
    origin: str  # the file (or Hub file) read


def _canonical_sha256(records: list[dict]) -> str:
    """sha256 of the records written as the build writes its JSONL: equal to the build file's hash."""
    h = hashlib.sha256()
    for rec in records:
        h.update((dumps(rec) + "\n").encode("utf-8"))
    return h.hexdigest()


def _read_jsonl_file(path: Path) -> LoadedSplit:
    """Read a split from one JSONL file: the hash is of exactly the bytes parsed."""
    data = path.read_bytes()
    records = []
    for lineno, line in enumerate(data.decode("utf-8").splitlines(), 1):
        try:
            rec = loads_strict(line)
        except ValueError as err:
            raise DataMismatch(f"{path}:{lineno}: {getattr(err, 'msg', err)}; expected one JSON record per line") from None
        records.append(rec)
    return LoadedSplit(records, hashlib.sha256(data).hexdigest(), str(path))


def _read_parquet_file(path: Path | str, origin: str) -> LoadedSplit:
    import pyarrow.parquet as pq

    try:
        records = pq.read_table(path).to_pylist()
    except Exception as err:  # noqa: BLE001 - any unreadable file is reported by name
        raise DataMismatch(f"{origin}: not a readable Parquet file ({type(err).__name__}: {err})") from None
    return LoadedSplit(records, _canonical_sha256(records), origin)


class DataSource:
    """Where the published splits are: a local folder (``data_dir``) or a Hub organisation.

    Files are read directly (JSONL, or the Parquet of the Hub layout): no ``datasets`` cache,
    which could hand back another folder's data under the same builder name. What is read is
    hashed, compared with the manifest that describes it, and refused on a mismatch (without
    a manifest, every record is checked against the task's schema); the hash of what was
    read is what results.json records.
    """

    def __init__(self, data_dir: str | Path | None = None, hub_org: str | None = None) -> None:
        if (data_dir is None) == (hub_org is None):
            raise ValueError("give exactly one of a data folder or a Hub organisation")
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.hub_org = hub_org
        if hub_org is not None:
            try:
                check_hub_name(hub_org, "--hub-org")
            except UnsafePath as err:
                raise ValueError(str(err)) from None
        self._cache: dict[tuple[str, str], LoadedSplit] = {}
        self._manifests: dict[str, dict | None] = {}
        if self.data_dir is not None:
            _check_data_folder(self.data_dir)

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

    def _parquet(self, entry: TaskEntry, split: str) -> Path | None:
        """The split's file in a folder of the Hub layout (``push --to-dir``)."""
        if self.data_dir is None:
            return None
        return self.data_dir / entry.task_id / "data" / f"{_key(entry, split)}.parquet"

    def has_split(self, entry: TaskEntry, split: str) -> bool:
        if self.data_dir is not None:
            return self._jsonl(entry, split).is_file() or self._parquet(entry, split).is_file()
        try:
            self.load(entry, split)
        except HubUnreachable:
            raise  # no Hub at all is an error, not a missing split
        except Exception:
            return False
        return True

    def load(self, entry: TaskEntry, split: str) -> list[dict]:
        return self._loaded(entry, split).records

    def sha256(self, entry: TaskEntry, split: str) -> str:
        """sha256 of the split as read and evaluated (checked against its manifest when there is one)."""
        return self._loaded(entry, split).sha256

    def _loaded(self, entry: TaskEntry, split: str) -> LoadedSplit:
        key = (entry.name, split)
        if key not in self._cache:
            loaded = self._load(entry, split)
            self._verify(entry, split, loaded)
            self._cache[key] = loaded
        return self._cache[key]

    def _load(self, entry: TaskEntry, split: str) -> LoadedSplit:
        if self.data_dir is None:
            return self._load_hub(entry, split)
        path, parquet = self._jsonl(entry, split), self._parquet(entry, split)
        if path.is_file():
            return _read_jsonl_file(path)
        if parquet.is_file():
            return _read_parquet_file(parquet, str(parquet))
        why = self._why_missing(entry, split)
        raise FileNotFoundError(
            f"{entry.name}: no split {split!r} in {self.data_dir}{why}: expected {path} "
            f"(evalita-data build) or {parquet} (Hub layout)"
        )

    def _load_hub(self, entry: TaskEntry, split: str) -> LoadedSplit:
        repo, name = f"{self.hub_org}/{entry.task_id}", f"data/{_key(entry, split)}.parquet"
        return _read_parquet_file(_hub_file(repo, name), f"hf://datasets/{repo}/{name}")

    def _manifest_entry(self, entry: TaskEntry) -> tuple[dict | None, str]:
        """(the task's manifest entry, where it was read) from the build or the published manifest.json."""
        if self.data_dir is not None:
            build = self.data_dir / "manifest.json"
            if build.is_file():
                return _read_json(build).get("tasks", {}).get(entry.task_id), str(build)
            published = self.data_dir / entry.task_id / "manifest.json"
            return (_read_json(published) if published.is_file() else None), str(published)
        repo = f"{self.hub_org}/{entry.task_id}"
        if repo not in self._manifests:
            try:
                self._manifests[repo] = _read_json(Path(_hub_file(repo, "manifest.json")))
            except HubUnreachable:
                raise
            except FileNotFoundError:
                self._manifests[repo] = None  # a repository without manifest: nothing to compare with
        return self._manifests[repo], f"hf://datasets/{repo}/manifest.json"

    def _verify(self, entry: TaskEntry, split: str, loaded: LoadedSplit) -> None:
        manifest, where = self._manifest_entry(entry)
        expected = (manifest or {}).get("splits", {}).get(_key(entry, split), {}).get("sha256")
        if expected is None:
            # No manifest vouches for these bytes: every record must match the task's schema.
            _check_records(entry, loaded)
            return
        if expected != loaded.sha256:
            raise DataMismatch(
                f"{loaded.origin}: sha256 of the data read ({loaded.sha256[:12]}...) differs from {where} "
                f"({expected[:12]}...); the data changed after the build: build (or push) again, nothing was evaluated"
            )

    def _why_missing(self, entry: TaskEntry, split: str) -> str:
        """Why the build has no such split, from its manifest (e.g. the test gold is not public)."""
        try:
            manifest, _ = self._manifest_entry(entry)
        except ValueError:
            return ""
        for part in (manifest or {}).get("report", {}).get("missing", []):
            if _key(entry, split) in part.get("splits", []):
                return f" (not built: {', '.join(part.get('files', []))} missing. {part.get('hint', '')})"
        return ""


def _check_records(entry: TaskEntry, loaded: LoadedSplit) -> None:
    """Refuse the first record that does not match the task's JSON Schema (and its own checks)."""
    for number, record in enumerate(loaded.records, 1):
        problems = record_problems(entry.task_id, record)
        if problems:
            more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
            raise DataMismatch(
                f"{loaded.origin}: record {number}: {'; '.join(problems[:3])}{more}; without a manifest.json to verify "
                f"the data by hash, every record must match the {entry.task_id} schema: nothing was evaluated"
            )


def _key(entry: TaskEntry, split: str) -> str:
    return f"{entry.config}/{split}" if entry.config else split


def _read_json(path: Path) -> dict:
    import json

    try:
        return json.loads(path.read_text("utf-8"))
    except ValueError as err:
        raise DataMismatch(f"{path}: not valid JSON ({err})") from None


def _hub_file(repo: str, name: str) -> str:
    """A file of a Hub dataset repository, through huggingface_hub's content-addressed cache."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError, RepositoryNotFoundError

    from evalita_data.network import hub_endpoint

    try:
        return hf_hub_download(repo, name, repo_type="dataset")
    except LocalEntryNotFoundError:  # offline (HF_HUB_OFFLINE) or unreachable, and not in the local cache
        raise HubUnreachable(f"hf://datasets/{repo}/{name}: the Hub at {hub_endpoint()} cannot be reached (offline, HF_HUB_OFFLINE or no network) "
                                "and the file is not in the local cache; evaluate a local folder with --data") from None
    except (EntryNotFoundError, RepositoryNotFoundError) as err:
        raise FileNotFoundError(f"hf://datasets/{repo}/{name}: not found on the Hub ({type(err).__name__})") from None
    except Exception as err:  # noqa: BLE001 - offline, refused, timed out: one line
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise HubUnreachable(f"hf://datasets/{repo}/{name}: cannot read it from the Hub at {hub_endpoint()} ({first[:200]}); "
                                "check the network or HF_ENDPOINT, or evaluate a local folder with --data") from None


def _check_data_folder(folder: Path) -> None:
    """A --data folder is a build or a Hub-layout folder, not e.g. the raw originals."""
    if (folder / "manifest.json").is_file():
        return
    found = [folder / tid for tid in task_ids() if (folder / tid).is_dir()]
    # Builds and Hub layouts hold only JSONL, Parquet, cards and manifests; originals hold other files.
    foreign = next((p for t in found for p in t.rglob("*") if p.is_file() and p.suffix not in (".jsonl", ".parquet", ".md", ".json")), None)
    if found and foreign is None:
        return
    held = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))  # named: unregistered tasks?
    why = f"{foreign} is not a split file" if foreign else f"no <task>/ folder of {', '.join(task_ids())}; it holds {', '.join(held) or 'no folder'}"
    raise FileNotFoundError(
        f"{folder} is not a build folder (no manifest.json; {why}): --data takes the output of `evalita-data build` "
        "(or of `push --to-dir`); raw originals must be built first"
    )

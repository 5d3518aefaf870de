"""The repository layout that is published for one task, and the checks before publishing.

One repository per task (``<org>/<task>``)::

    README.md                      dataset card (YAML configs point at data/)
    eval.yaml                      the Hub benchmark file (hub/benchmark.py)
    manifest.json                  the task's entry of build/manifest.json
    data/<split>.parquet           one file per split (NER: data/<domain>/<split>.parquet)
    jsonl/<split>.jsonl            only with --jsonl: the build's JSONL, byte for byte

Every file is computed in memory from the build, deterministically, so the same
build always gives the same bytes and an unchanged build can be recognised remotely.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..card import CARD, DEFAULT_ORG, config_split, render_card
from ..errors import EvalitaDataError
from ..jsonl import read_jsonl
from ..manifest import MANIFEST_FILE, BuildManifest, BuiltTask, ManifestError, dumps
from .benchmark import EVAL_YAML, eval_yaml
from .parquet import parquet_bytes
from ..building.rawsource import sha256_file
from ..registry import get_task, task_ids
from ..safepaths import check_inside, check_split_key
from ..validate import validate_path

REPO_MANIFEST = MANIFEST_FILE  # the task's manifest in its repository


@dataclass(frozen=True)
class RepoFile:
    path: str  # path inside the repository, POSIX
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def git_oid(self) -> str:
        """Git blob id: what the Hub reports for files it stores without LFS."""
        return hashlib.sha1(b"blob %d\0" % len(self.data) + self.data).hexdigest()


@dataclass(frozen=True)
class TaskRepo:
    task: str
    repo_id: str
    files: tuple[RepoFile, ...]


class BuildRefused(EvalitaDataError):
    """The build folder cannot be published (invalid, incomplete or without a manifest)."""


def load_checked_manifest(build: Path, tasks: list[str] | None = None) -> tuple[BuildManifest, list[str]]:
    """The manifest and the tasks to publish, after validating the whole build.

    Refuses (BuildRefused) a folder without manifest, a task that is not built, any
    schema violation, and split files that differ from the manifest's sha256.
    """
    path = build / MANIFEST_FILE
    if not path.is_file():
        raise BuildRefused(f"{path}: no manifest; run 'evalita-data build' first (nothing is published without one)")
    try:
        manifest = BuildManifest.read(path)
    except ManifestError as err:
        raise BuildRefused(f"not a build manifest: {err}") from None
    built = manifest.tasks
    for task, entry in built.items():
        if task not in task_ids():
            raise BuildRefused(f"{path}: unknown task {task!r} in the manifest; known: {', '.join(task_ids())}")
        for key, split in entry.splits.items():
            check_split_key(key, f"{path} [{task}]")
            if split.file != f"{key}.jsonl":
                raise BuildRefused(f"{path} [{task}]: split {key} names file {split.file!r}; expected {key}.jsonl")
    chosen = list(tasks) if tasks else sorted(built)
    not_built = [t for t in chosen if t not in built]
    if not_built:
        raise BuildRefused(f"{path}: task(s) {', '.join(not_built)} not in the build; built: "
                           f"{', '.join(sorted(built)) or 'none'}")
    if not chosen:
        raise BuildRefused(f"{path}: the build has no task")
    violations, _ = validate_path(build)
    if violations:
        shown = "\n".join(str(v) for v in violations[:20])
        more = f"\n... and {len(violations) - 20} more" if len(violations) > 20 else ""
        raise BuildRefused(f"{build}: {len(violations)} validation problem(s); nothing published:\n{shown}{more}")
    for task in chosen:
        for key, split in built[task].splits.items():
            fpath = build / task / split.file
            if not fpath.is_file():
                raise BuildRefused(f"{fpath}: split {task}/{key} of the manifest is missing")
            if sha256_file(fpath) != split.sha256:
                raise BuildRefused(f"{fpath}: sha256 differs from {path}; the file changed after the build, build "
                                   "again")
    return manifest, chosen


def split_path(key: str, ext: str, folder: str) -> str:
    return f"{folder}/{key}.{ext}"


def task_repo(build: Path, task: str, entry: BuiltTask, org: str = DEFAULT_ORG, jsonl: bool = False) -> TaskRepo:
    """Every file of the task's repository, computed from the build."""
    paths = {key: split_path(key, "parquet", "data") for key in entry.splits}
    files = [
        RepoFile(CARD, render_card(task, entry, paths, org).encode("utf-8")),
        RepoFile(REPO_MANIFEST, dumps(entry.published_json(task)).encode("utf-8")),
    ]
    spec = get_task(task)
    pairs = [config_split(spec, key) for key in entry.splits]  # (config, split)
    evals = {(c if spec.configs else None): s for c, s in pairs if s == spec.eval_split}
    benchmark = eval_yaml(task, evals)
    if benchmark is not None:
        files.append(RepoFile(EVAL_YAML, benchmark))
    for key, split in entry.splits.items():
        source = build / task / split.file
        records = [rec for _, rec in read_jsonl(source)]
        files.append(RepoFile(paths[key], parquet_bytes(task, records)))
        if jsonl:
            files.append(RepoFile(split_path(key, "jsonl", "jsonl"), source.read_bytes()))
    return TaskRepo(task, f"{org}/{task}", tuple(files))


def write_repo_dir(repo: TaskRepo, dest: Path, root: Path | None = None) -> list[Path]:
    """Write the repository layout under ``dest`` (files not ours are left alone).

    Every target is resolved (symlinked folders included) before the first write: one
    that lands outside ``root`` (default ``dest``) refuses the whole repository.
    """
    targets = [check_inside(dest / f.path, root or dest) for f in repo.files]
    written = []
    for f, target in zip(repo.files, targets):
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file() or target.read_bytes() != f.data:
            target.write_bytes(f.data)
        written.append(target)
    return written

"""``evalita-data validate``: check a build folder or one JSONL file against the schemas."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from .jsonl import JsonlError, read_jsonl
from .manifest import MANIFEST_FILE, BuildManifest, ManifestError
from .registry import get_task, task_ids
from .safepaths import UnsafePath
from .schema_check import record_problems


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    field_problem: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path  # line 0: the whole file
        return f"{where}: {self.field_problem}"


def validate_file(path: Path, task_id: str) -> list[Violation]:
    """All violations in one split file, including duplicate ids within it."""
    spec = get_task(task_id)
    out: list[Violation] = []
    seen: dict[object, int] = {}
    if path.stat().st_size == 0:
        return [Violation(str(path), 0, "empty file; a split file holds at least one record")]
    try:
        for lineno, rec in read_jsonl(path):
            for problem in record_problems(task_id, rec):
                out.append(Violation(str(path), lineno, problem))
            if spec.id_field and isinstance(rec, dict) and spec.id_field in rec:
                key = rec[spec.id_field]
                if key in seen:
                    out.append(
                        Violation(str(path), lineno,
                                  f"{spec.id_field}: duplicate id {key!r} (first on line {seen[key]})")
                    )
                else:
                    seen[key] = lineno
    except JsonlError as err:
        out.append(Violation(str(path), err.line, err.problem))
    except UnicodeDecodeError as err:
        out.append(Violation(str(path), 0, f"not valid UTF-8 ({err.reason} at byte {err.start})"))
    return out


def task_of(path: Path, root: Path | None = None) -> str:
    """The task a split file belongs to: the first folder under the build root named like a task."""
    resolved = path.resolve()
    if root is not None and not resolved.is_relative_to(root.resolve()):
        raise UnsafePath(f"{path}: a symbolic link to {resolved}, outside the build {root}; not read (copy the file "
                         "instead)")
    parts = resolved.relative_to(root.resolve()).parts if root else resolved.parts
    for part in parts:
        if part in task_ids():
            return part
    raise ValueError(f"{path}: cannot tell which task this file belongs to; pass --task")


def split_files(build_dir: Path) -> list[Path]:
    """Every split file of a build folder, task by task, in a stable order."""
    files = []
    for tid in task_ids():
        tdir = build_dir / tid
        if tdir.is_dir():
            files.extend(sorted(tdir.rglob("*.jsonl")))
    return files


def validate_path(path: Path, task_id: str | None = None) -> tuple[list[Violation], int]:
    """Validate a build folder or one file; returns (violations, files checked)."""
    if path.is_dir() and path.name in task_ids() and not (path / MANIFEST_FILE).is_file():
        # One task folder of a build (build/wic): its split files.
        files = sorted(path.rglob("*.jsonl"))
        return [v for f in files for v in validate_file(f, task_id or path.name)], len(files)
    if path.is_dir():
        files = split_files(path)
        violations = []
        for f in files:
            violations.extend(validate_file(f, task_id or task_of(f, path)))
        return violations + manifest_violations(path, files), len(files)
    return validate_file(path, task_id or task_of(path)), 1


def manifest_violations(build_dir: Path, files: list[Path]) -> list[Violation]:
    """A build's files against its manifest.json (rows and sha256 of every split): a file edited, truncated or
    removed after the build, or one the build did not write, is a violation (``run`` refuses such data too)."""
    manifest_path = build_dir / MANIFEST_FILE
    if not manifest_path.is_file():
        return []  # a Hub layout (push --to-dir) or a loose folder: nothing to compare with
    try:
        manifest = BuildManifest.read(manifest_path)
    except ManifestError as err:
        return [Violation(str(manifest_path), 0,
                          f"not a build manifest: {str(err).removeprefix(f'{manifest_path}: ')}")]
    listed = {(build_dir / tid / split.file).resolve(): (tid, key, split) for tid, entry in manifest.tasks.items()
              for key, split in entry.splits.items()}
    out = [Violation(str(f), 0, f"not in {manifest_path}: the build did not write it")
           for f in files if f.resolve() not in listed]
    for resolved, (tid, key, split) in listed.items():
        path = build_dir / tid / split.file
        if not path.is_file():
            out.append(Violation(str(path), 0, f"missing: {manifest_path} lists split {tid}/{key}"))
            continue
        data = path.read_bytes()
        # Records are "\n"-terminated lines (a U+2028 inside a text is no line break: no str.splitlines).
        rows = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        if rows != split.rows:
            out.append(Violation(str(path), 0,
                                 f"{rows} rows, {manifest_path} says {split.rows}: the file changed after the build"))
        digest = hashlib.sha256(data).hexdigest()
        if digest != split.sha256:
            out.append(Violation(str(path), 0,
                                 f"sha256 {digest[:16]}… differs from {manifest_path} ({split.sha256[:16]}…): the file "
                                 "changed after the build; rebuild it (evalita-data build)"))
    return out

"""``evalita-data validate``: check a build folder or one JSONL file against the schemas."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .jsonl import JsonlError, read_jsonl
from .registry import get_task, task_ids
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
                        Violation(str(path), lineno, f"{spec.id_field}: duplicate id {key!r} (first on line {seen[key]})")
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
    parts = path.resolve().relative_to(root.resolve()).parts if root else path.resolve().parts
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
    if path.is_dir() and path.name in task_ids() and not (path / "manifest.json").is_file():
        # One task folder of a build (build/wic): its split files.
        files = sorted(path.rglob("*.jsonl"))
        return [v for f in files for v in validate_file(f, task_id or path.name)], len(files)
    if path.is_dir():
        files = split_files(path)
        violations = []
        for f in files:
            violations.extend(validate_file(f, task_id or task_of(f, path)))
        return violations, len(files)
    return validate_file(path, task_id or task_of(path)), 1

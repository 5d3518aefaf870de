"""The build manifest (``<build>/manifest.json``) and the per-task manifest of a Hub layout, typed.

One representation for its writer (the build pipeline, ``push``) and every reader
(validate, push, cards, the evaluator's sources). ``from_json`` checks the shape of every
field it knows and raises ``ManifestError``, one line naming the file and the field;
``to_json`` gives back what was read (keys it does not know included), so the bytes
written (``dumps``: sorted keys, indent 2, UTF-8) are those of the dict the build wrote.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import EvalitaDataError

MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = 1


class ManifestError(EvalitaDataError, ValueError):
    """A manifest whose shape is not the one the build writes."""


def _expect(value: Any, kind: type | tuple[type, ...], where: str, field_name: str, expected: str) -> Any:
    # bool is an int in Python; no manifest field that is a number may be a boolean.
    if not isinstance(value,
                      kind) or (isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,))):
        raise ManifestError(f"{where}: field {field_name}: expected {expected}, found {json.dumps(value)[:60]}")
    return value


def dumps(data: dict) -> str:
    """The bytes of a manifest file, as the build has always written them."""
    return json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


@dataclass(frozen=True)
class SplitEntry:
    rows: int
    sha256: str
    file: str

    @classmethod
    def from_json(cls, data: Any, where: str, name: str) -> "SplitEntry":
        _expect(data, dict, where, name, "an object {rows, sha256, file}")
        for key in ("rows", "sha256", "file"):
            if key not in data:
                raise ManifestError(f"{where}: field {name}.{key}: missing")
        return cls(_expect(data["rows"], int, where, f"{name}.rows", "an integer"),
                   _expect(data["sha256"], str, where, f"{name}.sha256", "a hex string"),
                   _expect(data["file"], str, where, f"{name}.file", "a file name"))

    def to_json(self) -> dict:
        return {"rows": self.rows, "sha256": self.sha256, "file": self.file}


@dataclass(frozen=True)
class MissingPart:
    """Splits of a task not built because optional originals are absent: the files that were
    missing and how to obtain them. None: a key a hand-made manifest leaves out (written back so)."""

    files: list[str] | None
    splits: list[str] | None
    hint: str | None
    other: dict = field(default_factory=dict)  # keys this version does not know, written back as read

    @classmethod
    def from_json(cls, data: Any, where: str, name: str) -> "MissingPart":
        _expect(data, dict, where, name, "an object {files, splits, hint}")
        lists = {}
        for key in ("files", "splits"):
            if key in data:
                lists[key] = [_expect(item, str, where, f"{name}.{key}", "a list of strings")
                              for item in _expect(data[key], list, where, f"{name}.{key}", "a list of strings")]
        hint = _expect(data["hint"], str, where, f"{name}.hint", "a string") if "hint" in data else None
        return cls(lists.get("files"), lists.get("splits"), hint,
                   {k: v for k, v in data.items() if k not in ("files", "splits", "hint")})

    def to_json(self) -> dict:
        known = {"files": self.files, "splits": self.splits, "hint": self.hint}
        return {**self.other, **{k: v for k, v in known.items() if v is not None}}


@dataclass
class BuildReport:
    """A built task's conversion report: records dropped and repaired (counts by reason, example
    locations by reason), the parts not built, and the converter's notes. None: a section a
    hand-made manifest leaves out (written back so)."""

    dropped: dict[str, int] | None = None
    repaired: dict[str, int] | None = None
    examples: dict[str, list[str]] | None = None
    missing: list[MissingPart] | None = None
    notes: dict[str, Any] | None = None
    other: dict = field(default_factory=dict)  # keys this version does not know, written back as read

    @classmethod
    def from_json(cls, data: Any, where: str, name: str) -> "BuildReport":
        _expect(data, dict, where, name, "an object")
        known = {key: _expect(data[key], dict, where, f"{name}.{key}", "an object")
                 for key in _REPORT_OBJECTS if key in data}
        if "missing" in data:
            parts = _expect(data["missing"], list, where, f"{name}.missing", "a list")
            known["missing"] = [MissingPart.from_json(part, where, f"{name}.missing[{i}]")
                                for i, part in enumerate(parts)]
        return cls(**known, other={k: v for k, v in data.items() if k not in _REPORT_OBJECTS and k != "missing"})

    def to_json(self) -> dict:
        out = {key: getattr(self, key) for key in _REPORT_OBJECTS if getattr(self, key) is not None}
        if self.missing is not None:
            out["missing"] = [part.to_json() for part in self.missing]
        return {**self.other, **out}


_REPORT_OBJECTS = ("dropped", "repaired", "examples", "notes")
# The fields of a task's entry other than its splits and report; absent (None) in hand-made manifests.
_OPTIONAL = {"tool": (str, "a string"), "tool_version": (str, "a string"), "seed": (int, "an integer"),
             "inputs": (dict, "an object"), "fetched": (dict, "an object")}


@dataclass
class BuiltTask:
    """A built task's entry: its splits (rows, sha256, file), raw inputs, conversion report, provenance."""

    splits: dict[str, SplitEntry]
    tool: str | None = None
    tool_version: str | None = None
    seed: int | None = None
    inputs: dict | None = None
    report: BuildReport | None = None
    fetched: dict | None = None
    # Keys this version does not know, written back as read.
    other: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any, where: str, name: str = "") -> "BuiltTask":
        prefix = f"{name}." if name else ""
        _expect(data, dict, where, name or "(top)", "an object with splits")
        if "splits" not in data:
            raise ManifestError(f"{where}: field {prefix}splits: missing")
        splits = _expect(data["splits"], dict, where, f"{prefix}splits", "an object of splits")
        known = {key: _expect(data[key], kind, where, prefix + key, what)
                 for key, (kind, what) in _OPTIONAL.items() if key in data}
        report = BuildReport.from_json(data["report"], where, f"{prefix}report") if "report" in data else None
        return cls(splits={key: SplitEntry.from_json(split, where, f"{prefix}splits.{key}")
                           for key, split in splits.items()},
                   report=report,
                   other={k: v for k, v in data.items() if k not in ("splits", "report") and k not in _OPTIONAL},
                   **known)

    def to_json(self) -> dict:
        out = {key: getattr(self, key) for key in _OPTIONAL if getattr(self, key) is not None}
        if self.report is not None:
            out["report"] = self.report.to_json()
        return {**self.other, **out, "splits": {key: split.to_json() for key, split in self.splits.items()}}

    def missing_parts(self) -> list[MissingPart]:
        """The conversion report's parts not built."""
        return list(self.report.missing or []) if self.report is not None else []

    def published_json(self, task: str) -> dict:
        """The task's ``manifest.json`` in its Hub repository: this entry and the task's id."""
        return {"task": task, **self.to_json()}


@dataclass(frozen=True)
class NotBuilt:
    status: str  # "missing" | "not_implemented"
    message: str

    @classmethod
    def from_json(cls, data: Any, where: str, name: str) -> "NotBuilt":
        _expect(data, dict, where, name, "an object {status, message}")
        return cls(_expect(data.get("status"), str, where, f"{name}.status", "a string"),
                   _expect(data.get("message"), str, where, f"{name}.message", "a string"))

    def to_json(self) -> dict:
        return {"status": self.status, "message": self.message}


@dataclass
class BuildManifest:
    """``<build>/manifest.json``: the built tasks and why the others were not built."""

    tasks: dict[str, BuiltTask] = field(default_factory=dict)
    not_built: dict[str, NotBuilt] = field(default_factory=dict)
    format: int | None = MANIFEST_FORMAT

    @classmethod
    def from_json(cls, data: Any, where: str) -> "BuildManifest":
        _expect(data, dict, where, "(top)", "an object {format, tasks, not_built}")
        if "tasks" not in data:
            raise ManifestError(f"{where}: field tasks: missing; expected tasks.<task>.splits")
        tasks = _expect(data["tasks"], dict, where, "tasks", "an object of tasks")
        not_built = _expect(data.get("not_built", {}), dict, where, "not_built", "an object of tasks")
        fmt = _expect(data["format"], int, where, "format", "an integer") if "format" in data else None
        return cls({task: BuiltTask.from_json(entry, where, f"tasks.{task}") for task, entry in tasks.items()},
                   {task: NotBuilt.from_json(why, where, f"not_built.{task}") for task, why in not_built.items()}, fmt)

    @classmethod
    def read(cls, path: Path) -> "BuildManifest":
        """The manifest file at ``path``; ``ManifestError`` if it is not JSON or not shaped as a manifest."""
        try:
            data = json.loads(path.read_text("utf-8"))
        except (ValueError, UnicodeDecodeError) as err:
            raise ManifestError(f"{path}: not valid JSON ({err})") from None
        return cls.from_json(data, str(path))

    def to_json(self) -> dict:
        out: dict = {"tasks": {t: e.to_json() for t, e in self.tasks.items()},
                     "not_built": {t: n.to_json() for t, n in self.not_built.items()}}
        if self.format is not None:
            out["format"] = self.format
        return out

    def dumps(self) -> str:
        return dumps(self.to_json())


def read_published(path: Path, where: str | None = None) -> BuiltTask:
    """A task's ``manifest.json`` of the Hub layout (its entry of the build manifest and ``task``)."""
    where = where or str(path)
    try:
        data = json.loads(path.read_text("utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise ManifestError(f"{where}: not valid JSON ({err})") from None
    if isinstance(data, dict) and "task" in data:
        _expect(data["task"], str, where, "task", "a task id")
        data = {k: v for k, v in data.items() if k != "task"}
    return BuiltTask.from_json(data, where)

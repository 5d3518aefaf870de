"""The one reader of the files of options (``run --config FILE``, a sweep file), YAML or JSON, by the strict rules of
docs/settings.md (files of options); values are never converted here (``RunSpec`` types them strictly)."""

from __future__ import annotations

import os
import reprlib
import stat
from pathlib import Path
from typing import Any

import yaml

MAX_BYTES = 1 << 20  # a run or a sweep of a thousand runs is a few kB
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60
_SHORT.maxlevel = 2


class ConfigFileError(ValueError):
    """A file of options that cannot be read as one: one line naming the file."""


def short(value: Any) -> str:
    """``repr(value)`` cut to a short excerpt, whatever its size (a message stays one short line)."""
    return _SHORT.repr(value)


class _Refused(yaml.MarkedYAMLError):
    """A rule of ours broken at a place of the file (``problem_mark``)."""


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader without aliases and without a key given twice in a mapping."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise _Refused(problem="a YAML alias (*name) is not accepted: write the value out",
                           problem_mark=self.peek_event().start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        lines: dict[Any, int] = {}
        for key_node, _value in node.value:
            key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
            try:
                first = lines.get(key)
            except TypeError:  # an unhashable key: the constructor's own error follows
                continue
            if first is not None:
                raise _Refused(problem=f"key {short(key)} given twice (first on line {first})",
                               problem_mark=key_node.start_mark)
            lines[key] = line
        return super().construct_mapping(node, deep=deep)


def read_text(path: Path) -> str:
    """The text of a regular file of at most ``MAX_BYTES``; a ``ConfigFileError`` naming it otherwise. Opened without
    blocking (a FIFO would wait for a writer) and checked on what was opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise ConfigFileError(f"{path}: cannot be read ({err.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigFileError(f"{path}: not a regular file (a YAML or JSON file was expected)")
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ConfigFileError(f"{path}: larger than {MAX_BYTES // 1024} KiB: not a file of options")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigFileError(f"{path}: not UTF-8 text (byte {err.start})") from None


def load_file(path: Path) -> Any:
    """The YAML or JSON document of ``path``, read by the rules above."""
    text = read_text(path)
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a safe loader, stricter)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ConfigFileError(f"{path}: {where}{err.problem or err.context or 'not YAML or JSON'}") from None
    except yaml.YAMLError as err:
        raise ConfigFileError(f"{path}: not YAML or JSON ({short(' '.join(str(err).split()))})") from None

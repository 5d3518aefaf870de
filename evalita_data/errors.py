"""Errors that name the file, the line or record, and what was expected."""

from __future__ import annotations

from pathlib import Path


class EvalitaDataError(Exception):
    """Base class of every error the data toolkit raises on purpose."""


class SourceError(EvalitaDataError):
    """A raw file does not have the shape its converter expects.

    ``where`` is a line number (int) or a record id / description (str).
    """

    def __init__(self, path: str | Path, where: int | str | None, message: str) -> None:
        self.path = str(path)
        self.where = where
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.where is None:
            loc = self.path
        elif isinstance(self.where, int):
            loc = f"{self.path}:{self.where}"
        else:
            loc = f"{self.path} [{self.where}]"
        return f"{loc}: {self.message}"


class MissingSource(EvalitaDataError):
    """Required original files of a task are not in the raw folder.

    Converters name the files (and a hint only when it says more than the task's
    ``obtain_hint``); the pipeline names the task and fills in its hint (``for_task``).
    """

    def __init__(self, files: list[str], hint: str | None = None, task: str | None = None) -> None:
        self.task = task
        self.files = files
        self.hint = hint
        super().__init__(f"{task + ': ' if task else ''}missing {', '.join(files)}." + (f" {hint}" if hint else ""))

    def for_task(self, task: str, default_hint: str) -> "MissingSource":
        return MissingSource(self.files, self.hint or default_hint, task)


class ValidationFailed(EvalitaDataError):
    """Converted records do not match their schema."""


class DiskFull(EvalitaDataError):
    """The device ran out of space; what was being written was discarded."""

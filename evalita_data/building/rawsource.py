"""Read access to one task's raw folder that remembers which files were read.

The pipeline hashes exactly the files a converter opened, so the manifest lists
the true inputs of every output.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import IO

from ..errors import SourceError


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class RawSource:
    """The folder ``raw/<task>/``; paths are relative to it."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.used: set[str] = set()

    def exists(self, name: str) -> bool:
        return (self.root / name).is_file()

    def path(self, name: str) -> Path:
        """Absolute path of a raw file, recorded as an input of the build."""
        full = self.root / name
        if not full.is_file():
            raise SourceError(full, None, "file not found")
        self.used.add(name)
        return full

    def glob(self, pattern: str) -> list[str]:
        """Relative names matching ``pattern``, sorted for a stable order."""
        if not self.root.is_dir():
            return []
        return sorted(
            p.relative_to(self.root).as_posix() for p in self.root.glob(pattern) if p.is_file()
        )

    def read_text(self, name: str) -> str:
        """Whole file decoded as strict UTF-8 (a BOM is an error: the sources have none)."""
        full = self.path(name)
        data = full.read_bytes()
        return decode_utf8(data, full)

    def open_text(self, name: str, newline: str | None = "") -> IO[str]:
        """Stream a UTF-8 file; a decoding error names the line it is on."""
        full = self.path(name)
        return _CheckedTextReader(full, newline)

    def inputs(self) -> dict[str, dict]:
        """sha256 and size of every file read, by relative name, sorted."""
        return {
            name: {"sha256": sha256_file(self.root / name), "bytes": (self.root / name).stat().st_size}
            for name in sorted(self.used)
        }


def decode_utf8(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise SourceError(
            path, line, f"not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start}); expected UTF-8 text"
        ) from None


class _CheckedTextReader(io.TextIOWrapper):
    """A text stream whose decoding errors become :class:`SourceError` with a line number."""

    def __init__(self, path: Path, newline: str | None) -> None:
        self._path = path
        self._raw = open(path, "rb")
        super().__init__(self._raw, encoding="utf-8", errors="strict", newline=newline)
        self._lines_seen = 0

    def __next__(self) -> str:  # type: ignore[override]
        try:
            line = super().__next__()
        except UnicodeDecodeError:
            # The exact line is found by re-reading bytes; only on the error path.
            data = self._path.read_bytes()
            decode_utf8(data, self._path)
            raise
        self._lines_seen += 1
        return line

    def read(self, size: int | None = -1) -> str:  # type: ignore[override]
        try:
            return super().read(size)
        except UnicodeDecodeError:
            decode_utf8(self._path.read_bytes(), self._path)
            raise

"""Append-only cache of per-request results, so that a killed run resumes where it stopped.

One JSON line per finished request: ``{"key": sha256, "value": ...}``. The key is the
hash of the model identity and the request, so a cache is only ever reused for the
same model and the same prompt text. A line cut short by a crash, or with a null value,
is ignored: that request is computed again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable


def request_key(model_key: str, kind: str, payload: Any) -> str:
    blob = json.dumps([model_key, kind, payload], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class RequestCache:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.values: dict[str, Any] = {}
        if self.path.is_file():
            with open(self.path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                        key, value = rec["key"], rec["value"]
                    except (json.JSONDecodeError, KeyError, TypeError):
                        continue  # the last line of a killed run
                    if isinstance(key, str) and value is not None:
                        self.values[key] = value  # a null value (a damaged line) is missing: computed again
        self._fh = None

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def __len__(self) -> int:
        return len(self.values)

    def add(self, items: Iterable[tuple[str, Any]], sync: bool = True) -> None:
        """Record finished requests: flushed to the file (a killed process keeps them) and,
        unless ``sync=False``, fsynced (a crashed machine keeps them) before returning."""
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")
            # A killed run may have left half a line: start on a fresh one.
            if self._fh.tell() > 0:
                with open(self.path, "rb") as fh:
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":
                        self._fh.write("\n")
        for key, value in items:
            self.values[key] = value
            self._fh.write(json.dumps({"key": key, "value": value}, ensure_ascii=False) + "\n")
        self._fh.flush()
        if sync:
            os.fsync(self._fh.fileno())

    def sync(self) -> None:
        """fsync what ``add(..., sync=False)`` wrote."""
        if self._fh is not None:
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None

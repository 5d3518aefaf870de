"""Append-only cache of per-request results, so that a killed run resumes where it stopped: one JSON line per finished
request, ``{"key": sha256, "value": ...}``, read back untrusted (docs/evaluator.md#resume).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ..api import RequestKind

# Finished requests reported one by one (on_result) are fsynced at most this often.
SYNC_INTERVAL_S = 0.5


def request_key(model_key: str, kind: str, payload: Any) -> str:
    blob = json.dumps([model_key, kind, payload], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def value_fits(kind: str, value: object) -> bool:
    """Whether a cached value has the shape the runner reads for requests of ``kind``."""
    if kind == RequestKind.LOGLIKELIHOOD:  # [log-probability of the continuation, is it the greedy answer]
        return (isinstance(value, list) and len(value) == 2 and isinstance(value[0], (int, float))
                and not isinstance(value[0], bool) and math.isfinite(value[0]) and isinstance(value[1], bool))
    if kind == RequestKind.GENERATE:
        return isinstance(value, str)
    raise ValueError(f"unknown request kind {kind!r}")


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


class RequestCache:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.values: dict[str, Any] = {}
        self.damaged_lines = 0
        self._wrong_shape: set[str] = set()  # keys read back with a value that does not fit their kind
        if self.path.is_file():
            with open(self.path, "rb") as fh:
                for raw in fh:
                    if not raw.strip():
                        continue  # the fresh line started after a killed run's cut
                    try:
                        rec = json.loads(raw.decode("utf-8"))
                        key, value = rec["key"], rec["value"]
                    except (UnicodeDecodeError, ValueError, KeyError, TypeError, IndexError):
                        key = value = None
                    if isinstance(key, str) and value is not None:
                        self.values[key] = value
                    else:
                        self.damaged_lines += 1
        self._fh = None

    def get(self, key: str, kind: str) -> Any | None:
        """The cached value of a request of ``kind``; None when missing or of the wrong shape."""
        value = self.values.get(key)
        if value is None:
            return None
        if not value_fits(kind, value):
            self._wrong_shape.add(key)
            return None
        return value

    @property
    def wrong_shape(self) -> int:
        """How many distinct cached values were read back with a shape that does not fit their request."""
        return len(self._wrong_shape)

    def damage_note(self) -> str | None:
        """One line saying what was ignored, or None when the cache was sound."""
        if not self.damaged_lines and not self._wrong_shape:
            return None
        parts = [_plural(self.damaged_lines, "damaged line", "damaged lines")] if self.damaged_lines else []
        if self._wrong_shape:
            parts.append(_plural(self.wrong_shape, "value of the wrong shape", "values of the wrong shape"))
        return f"{self.path}: {' and '.join(parts)} ignored; those requests are computed again"

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def __len__(self) -> int:
        return len(self.values)

    def add(self, items: Iterable[tuple[str, Any]], sync: bool = True) -> None:
        """Record finished requests: flushed to the file (a killed process keeps them) and, unless ``sync=False``,
        fsynced (a crashed machine keeps them) before returning."""
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


class ResultSaver:
    """The ``on_result`` callback of one backend call: each finished request saved as it arrives and reported to the
    run's ``timer`` with the seconds since the previous one; ``finish`` writes the rest. ``to_json[i]``: request i's
    result as the cache stores it; ``tasks[i]``: the task it counts to (a call may hold several tasks' requests)."""

    def __init__(self, cache: RequestCache, keys: list[str], requests: list[Any],
                 to_json: Sequence[Callable[[Any], Any]], bar: Any, counts: Any, kind: str,
                 timer: Callable[[str, list[Any], float], None] | None = None,
                 tasks: Sequence[str] | None = None) -> None:
        self.cache, self.keys, self.requests, self.to_json = cache, keys, requests, to_json
        self.bar, self.counts, self.kind, self.timer, self.tasks = bar, counts, kind, timer, tasks
        self.written = [False] * len(keys)
        self.last_sync = self.mark = time.monotonic()

    def __call__(self, index: int, value: Any) -> None:
        if not (isinstance(index, int) and 0 <= index < len(self.keys)) or self.written[index]:
            raise RuntimeError(f"backend reported result {index!r} of a call with {len(self.keys)} requests twice or "
                               "out of range")
        self._write([(index, value)], sync=time.monotonic() - self.last_sync >= SYNC_INTERVAL_S)

    def finish(self, values: list[Any]) -> None:
        self._write([(i, v) for i, v in enumerate(values) if not self.written[i]], sync=True)

    def _write(self, items: list[tuple[int, Any]], sync: bool) -> None:
        if items:
            self.cache.add(((self.keys[i], self.to_json[i](v)) for i, v in items), sync=sync)
            for i, _ in items:
                self.written[i] = True
                if self.tasks is not None:
                    self.counts[f"computed:{self.tasks[i]}"] += 1
            self.counts["computed"] += len(items)
            self.bar.update(len(items))
            now = time.monotonic()
            if self.timer is not None:  # the time since the previous result went into these
                self.timer(self.kind, [self.requests[i] for i, _ in items], now - self.mark)
            self.mark = now
        elif sync:
            self.cache.sync()
        if sync:
            self.last_sync = time.monotonic()

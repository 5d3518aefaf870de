"""The one JSON Lines format of the build: UTF-8, not ASCII-escaped, one record per line."""

from __future__ import annotations

import json
import json.encoder
from pathlib import Path
from typing import Iterable, Iterator


# One encoder for every record: json.dumps with an option builds a new JSONEncoder per call,
# and JSONEncoder.encode a new C encoder (json.encoder.c_make_encoder) per call. The one C
# encoder below is the one encode() would build for ensure_ascii=False, without the circular
# reference check (records are trees); where the C module is absent, encode() itself.
_ENCODER = json.JSONEncoder(ensure_ascii=False, check_circular=False)


def _c_encoder():
    """The C encoder, or None where this Python lacks it or builds it differently (an internal API):
    it is used only if it writes a probe record exactly as ``json.dumps`` does."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return None
    probe = {"t": "è \n \"x\" \u2028", "n": [1, -2.5, 1e300, None, True], "o": {}}
    try:
        encode = make(None, _ENCODER.default, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)
        if "".join(encode(probe, 0)) != json.dumps(probe, ensure_ascii=False):
            return None
    except (TypeError, ValueError):
        return None
    return encode


_C_ENCODE = _c_encoder()


def dumps(record: dict) -> str:
    """``json.dumps(record, ensure_ascii=False)``, the same text."""
    if _C_ENCODE is None:
        return _ENCODER.encode(record)
    return "".join(_C_ENCODE(record, 0))


def write_jsonl(path: Path, records: Iterable[dict]) -> int:
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        for rec in records:
            fh.write(dumps(rec))
            fh.write("\n")
            n += 1
    return n


class DuplicateKey(ValueError):
    """A JSON object names the same key twice (the last value would silently win)."""


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(f"duplicate key {key!r} in one JSON object")
        out[key] = value
    return out


def loads_strict(text: str) -> object:
    """``json.loads`` that refuses duplicate keys (raises DuplicateKey) instead of keeping the last."""
    return json.loads(text, object_pairs_hook=_no_duplicate_keys)


class JsonlError(ValueError):
    """A line of a JSONL file that is not one JSON record; ``line`` is its number."""

    def __init__(self, path: Path, line: int, problem: str) -> None:
        self.path, self.line, self.problem = path, line, problem
        super().__init__(f"{path}:{line}: {problem}")


def read_jsonl(path: Path) -> Iterator[tuple[int, object]]:
    """(line number, parsed value) pairs; a line that is not JSON raises JsonlError naming it."""
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                raise JsonlError(path, lineno, "empty line; expected one JSON record per line")
            try:
                yield lineno, loads_strict(line)
            except DuplicateKey as err:
                raise JsonlError(path, lineno, str(err)) from None
            except json.JSONDecodeError as err:
                raise JsonlError(path, lineno, f"not valid JSON ({err.msg})") from None

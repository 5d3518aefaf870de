"""What a published run may say of where it ran: nothing of the machine's paths.

A results.json names the model and the data as they were given to ``run``: a Hub id, or a
local folder (``/tmp/x/model``, ``/work/build``). Published (``push-results``, ``export-eee``),
a Hub id stays with its revision; a local model folder becomes its folder name, marked
``local_folder`` and identified by the weights' fingerprint (``files_sha256``, already in the
record); a local data folder becomes its folder name (its splits are identified by
``manifest_sha256``). Every other occurrence of those paths (and of the run folder) in any
published string is replaced by the same public name, and :func:`check_no_local_paths`
refuses a file that still holds one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from ..naming import is_local

# Sources ``run --data`` names that are not folders (eval/sources: hf://ORG, hf:ORG).
HUB_DATA_PREFIXES = ("hf://", "hf:")


class LocalPathLeft(ValueError):
    """A file about to be published still holds a path of this machine."""


def _local_name(path: str) -> str:
    return Path(path.rstrip("/\\")).name or "local"


def local_replacements(doc: dict, results_dir: Path | None = None) -> dict[str, str]:
    """{local path as written: public name}, longest first (a path inside another is replaced before it)."""
    found: dict[str, str] = {}
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    for key in ("name_or_path", "tokenizer"):
        value = model.get(key)
        if isinstance(value, str) and value and is_local(value):
            found[value] = _local_name(value)
    options = model.get("options") if isinstance(model.get("options"), dict) else {}
    for value in options.values():
        if isinstance(value, str) and value.startswith(("/", "~", "./", "../")):
            found[value] = _local_name(value)
    data = doc.get("data") if isinstance(doc.get("data"), dict) else {}
    source = data.get("source")
    if isinstance(source, str) and source and not source.startswith(HUB_DATA_PREFIXES):
        found[source] = _local_name(source)
    if results_dir is not None:  # absolute only: a relative "." or "out" is no path of this machine
        form = str(results_dir.resolve())
        found[form] = _local_name(form)
    for path in list(found):  # the resolved form of a relative or linked path, where it differs
        if path.startswith(("/", ".", "~")):
            resolved = str(Path(path).expanduser().resolve())
            found.setdefault(resolved, found[path])
    # Never a bare root, home or dot: replacing those would rewrite every path-like text, not a local path.
    kept = {k: v for k, v in found.items() if k != v and Path(k).name not in ("", ".", "..", "~")}
    return dict(sorted(kept.items(), key=lambda kv: -len(kv[0])))


def _scrub_text(text: str, replacements: dict[str, str]) -> str:
    for path, name in replacements.items():
        text = text.replace(path, name)
    return text


def _scrub(value: Any, replacements: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _scrub_text(value, replacements)
    if isinstance(value, list):
        return [_scrub(v, replacements) for v in value]
    if isinstance(value, dict):
        return {_scrub_text(k, replacements): _scrub(v, replacements) for k, v in value.items()}
    return value


def public_results(doc: dict, results_dir: Path | None = None) -> dict:
    """The results.json as published: model and data named publicly, no local path in any string."""
    replacements = local_replacements(doc, results_dir)
    out = _scrub(doc, replacements)
    model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
    if isinstance(model.get("name_or_path"), str) and model["name_or_path"] in replacements:
        out["model"]["local_folder"] = True  # named by its folder; files_sha256 identifies the weights
    data = doc.get("data") if isinstance(doc.get("data"), dict) else {}
    if isinstance(data.get("source"), str) and data["source"] in replacements:
        out["data"]["local_folder"] = True
    return out


def public_bytes(data: bytes, replacements: dict[str, str]) -> bytes:
    """A published text file (a samples JSONL) with the local paths replaced, in raw and JSON-escaped form."""
    if not replacements:
        return data
    text = data.decode("utf-8", errors="surrogateescape")
    for path, name in replacements.items():
        text = text.replace(path, name).replace(json.dumps(path)[1:-1], name)
    return text.encode("utf-8", errors="surrogateescape")


def check_no_local_paths(files: Iterable[tuple[str, bytes]], replacements: dict[str, str]) -> None:
    """Refuse to publish a file still holding one of the local paths (a field this module does not know yet)."""
    for name, data in files:
        for path in replacements:
            if path.encode("utf-8") in data or json.dumps(path)[1:-1].encode("utf-8") in data:
                raise LocalPathLeft(f"{name}: still contains the local path {path!r}; not published")


def model_label(model: dict) -> str:
    """The model as a card or table names it: ``org/name@rev``, or ``name (local folder, weights sha256 1234abcd)``."""
    name = str(model.get("name_or_path") or "model")
    if model.get("local_folder") or is_local(name):
        digest = model.get("files_sha256")
        weights = f", weights sha256 {digest[:12]}" if isinstance(digest, str) and digest else ""
        return f"{_local_name(name)} (local folder{weights})"
    return f"{name}@{model['revision']}" if model.get("revision") else name

"""What identifies the numbers a backend returns: the resume-cache key and ``results.json``'s ``model``
(``Backend.cache_identity()``; docs/evaluator.md#resume)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Mapping

from .gguf import gguf_model

# The files of a model folder that can change a number: weights, configuration, tokenizer (vocabularies, merges,
# sentencepiece models), chat templates, remote code; not READMEs, images, licences (editing them keeps the cache).
MODEL_FILE_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".gguf", ".json", ".model", ".txt", ".jinja",
                                 ".py", ".tiktoken", ".vocab"})
_READ_CHUNK = 1 << 20


def identity_key(identity: dict[str, Any]) -> str:
    """sha256 of the identity as canonical JSON (sorted keys): the model part of every cache key."""
    blob = json.dumps(identity, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's content, read in chunks (weights may be large)."""
    content = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_READ_CHUNK):
            content.update(chunk)
    return content.hexdigest()


class Sha256Memo:
    """The sha256 of files already hashed, keyed by path, size, modification and status-change times, inode and device
    (docs/evaluator.md#resume); an unreadable or damaged memo is ignored and rewritten, never trusted.

    A file changed less than ``racy_s`` seconds ago is hashed but not remembered: file times tick coarsely, so a
    second write within the same tick could leave every stamp as it was (git's "racy" entries)."""

    racy_s = 2.0

    def __init__(self, path: Path | None = None) -> None:
        root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        self.path = path or root / "evalita-llm" / "file-sha256.json"
        self._entries: dict[str, list] | None = None
        self._changed = False

    def _load(self) -> dict[str, list]:
        if self._entries is None:
            try:
                data = json.loads(self.path.read_text("utf-8"))
            except (OSError, ValueError):
                data = {}
            self._entries = {k: v for k, v in data.items() if _memo_entry_ok(v)} if isinstance(data, dict) else {}
        return self._entries

    def sha256(self, path: Path) -> str:
        key, st = str(path.resolve()), path.stat()
        stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]
        entry = self._load().get(key)
        if entry is not None and entry[0] == stamp:
            return entry[1]
        digest = file_sha256(path)
        settled = time.time_ns() - st.st_ctime_ns > self.racy_s * 1e9
        if settled and path.stat().st_ctime_ns == st.st_ctime_ns:  # not written while it was read: safe to remember
            self._load()[key] = [stamp, digest]
            self._changed = True
        return digest

    def save(self) -> None:
        if not self._changed:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self._entries, sort_keys=True), "utf-8")
            tmp.replace(self.path)
        except OSError:
            pass  # a read-only cache folder only costs the next run a re-hash
        self._changed = False


def _memo_entry_ok(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == 2 and isinstance(value[0], list) and len(value[0]) == 5
            and all(type(x) is int for x in value[0]) and isinstance(value[1], str)
            and re.fullmatch(r"[0-9a-f]{64}", value[1]) is not None)


def folder_fingerprint(folder: str | Path, memo: Sha256Memo | None = None) -> str:
    """sha256 over the sorted relative paths, sizes and contents of the files of ``folder`` that can change a number
    (``MODEL_FILE_SUFFIXES``; hidden files and folders left out): weights replaced in place change it, a ``touch``
    does not. ``memo`` (default: the user's ``Sha256Memo``) skips files hashed before and unchanged since."""
    root = Path(folder)
    memo = memo or Sha256Memo()
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in MODEL_FILE_SUFFIXES
                   and not any(part.startswith(".") for part in p.relative_to(root).parts))
    total = hashlib.sha256()
    for path in files:
        line = f"{path.relative_to(root).as_posix()}\0{path.stat().st_size}\0{memo.sha256(path)}\n"
        total.update(line.encode("utf-8"))
    memo.save()
    return total.hexdigest()


def hub_cached(repo_id: str, filename: str, revision: str | None) -> str | None:
    """The path of a Hub file in the local Hub cache (offline), or None when it is not there (not downloaded, or not a
    Hub id at all: a hosted API model name)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, filename, revision=revision)
    except Exception:  # noqa: BLE001 - an id that is no Hub repository name, huggingface_hub absent
        return None
    return found if isinstance(found, str) else None


def hub_snapshot_commit(repo_id: str, revision: str | None) -> str | None:
    """The commit of the locally cached snapshot of a Hub model, or None when there is none."""
    found = hub_cached(repo_id, "config.json", revision)
    parts = Path(found).parts if found is not None else ()
    return parts[-2] if len(parts) >= 2 and parts[-3] == "snapshots" else None


def model_source_identity(name_or_path: str, revision: str | None) -> dict[str, Any]:
    """Which model files: a local folder's content fingerprint (a single local file's sha256), else the Hub id,
    revision and snapshot commit."""
    local = Path(name_or_path).expanduser()
    if name_or_path and local.is_dir():
        return {"name_or_path": name_or_path, "files_sha256": folder_fingerprint(local)}
    if name_or_path and local.is_file():
        memo = Sha256Memo()
        digest = memo.sha256(local)
        memo.save()
        return {"name_or_path": name_or_path, "file_sha256": digest}
    return {"name_or_path": name_or_path, "revision": revision, "commit": hub_snapshot_commit(name_or_path, revision)}


def tokenizer_identity(tokenizer: Any, model_name_or_path: str) -> dict[str, Any]:
    """The tokenizer's name, its folder's fingerprint when it is not the model's (whose fingerprint has its files
    already), and the sha256 of its chat template (which ``--apply-chat-template`` renders prompts with)."""
    if tokenizer is None:
        return {"tokenizer": None}
    name = getattr(tokenizer, "name_or_path", "") or ""
    out: dict[str, Any] = {"tokenizer": name}
    if name and name != model_name_or_path and Path(name).expanduser().is_dir():
        out["tokenizer_files_sha256"] = folder_fingerprint(Path(name).expanduser())
    template = getattr(tokenizer, "chat_template", None)
    text = template if isinstance(template, str) else json.dumps(template, sort_keys=True) if template else None
    out["chat_template_sha256"] = None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()
    return out


def gguf_identity(model: str, revision: str | None, extra: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """``{"gguf_file", "gguf_sha256"}`` of a GGUF file on the Hub, looked up in the local Hub cache only (loading the
    model downloaded it; ``gguf_sha256`` is None when it is not there); None otherwise: a local .gguf or a folder
    holding one is identified by its content already (``model_source_identity``)."""
    found = gguf_model(model, extra)
    if found is None or found.local_path is not None:
        return None
    cached = hub_cached(found.source, found.file, revision)
    return {"gguf_file": found.file, "gguf_sha256": file_sha256(Path(cached)) if cached is not None else None}


def model_identity(identity: dict[str, Any], name_or_path: str, tokenizer: Any,
                   gguf_args: dict[str, Any] | None = None) -> dict[str, Any]:
    """``identity`` (``Backend.cache_identity()``'s, less ``device``: an engine's or a server's is its own) with the
    model's files and its tokenizer's; given the typed options of a backend that loads GGUF files, a Hub GGUF file's."""
    identity.pop("device", None)
    identity.update(model_source_identity(name_or_path, identity.get("revision")))
    identity.update(tokenizer_identity(tokenizer, name_or_path))
    if gguf_args is not None:
        identity.update(gguf_identity(name_or_path, identity.get("revision"), gguf_args) or {})
    return identity

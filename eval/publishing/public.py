"""What a published run may say of where it ran: nothing of the machine's paths (docs/push-results.md, "Nothing
local is published"); :func:`check_publishable` refuses a file that still holds one."""

from __future__ import annotations

import getpass
import json
import re
from pathlib import Path
from contextlib import suppress
from dataclasses import replace
from typing import Any, Iterable

from ..naming import display_name, is_local, is_local_model
from ..record.build import run_id
from ..record.model import ModelRecord, RunRecord
from ..record.read import parse_record

class LocalPathLeft(ValueError):
    """A file about to be published still holds a path of this machine."""


def _local_name(path: str) -> str:
    return Path(path.rstrip("/\\")).name or "local"


def local_replacements(run: RunRecord, results_dir: Path | None = None) -> dict[str, str]:
    """{local path as written: public name}, longest first (a path inside another is replaced before it)."""
    found: dict[str, str] = {}
    model = run.model
    for value in (model.tokenizer, model.name_or_path):  # the model's folder becomes its name (a tokenizer in it too)
        if value and is_local(value):
            found[value] = display_name(model) if value == model.name_or_path else _local_name(value)
    for value in [*model.options.values(), *(model.resolved or {}).values()]:
        if isinstance(value, str) and value.startswith(("/", "~", "./", "../")):
            found[value] = _local_name(value)
    source = run.data.source or ""
    # hf://ORG and hf:ORG name Hub organisations (eval/sources); hf:PATH (an organisation name never holds a '/') is the
    # official layout in a local folder: its path is local.
    hub = source.startswith("hf://") or (source.startswith("hf:") and "/" not in source)
    if folder := "" if hub else source.removeprefix("hf:"):
        found[folder] = _local_name(folder)
    if results_dir is not None:  # absolute only: a relative "." or "out" is no path of this machine
        form = str(results_dir.resolve())
        found[form] = _local_name(form)
    for path in list(found):  # the resolved form of a relative, bare or linked path, where it differs
        found.setdefault(str(Path(path).expanduser().resolve()), found[path])
    # Never a bare root, home or dot: replacing those would rewrite every path-like text, not a local path.
    kept = {k: v for k, v in found.items() if k != v and Path(k).name not in ("", ".", "..", "~")}
    return dict(sorted(kept.items(), key=lambda kv: -len(kv[0])))


def _bare(path: str) -> bool:
    """A folder named bare (``--model tiny``): no path, only a name, replaced where a whole string is it."""
    return "/" not in path and "\\" not in path


def _scrub_text(text: str, replacements: dict[str, str]) -> str:
    for path, name in replacements.items():
        text = (name if text == path else text) if _bare(path) else text.replace(path, name)
    return text


def _scrub(value: Any, replacements: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _scrub_text(value, replacements)
    if isinstance(value, list):
        return [_scrub(v, replacements) for v in value]
    if isinstance(value, dict):
        return {_scrub_text(k, replacements): _scrub(v, replacements) for k, v in value.items()}
    return value


def public_record(run: RunRecord, model_name: str | None = None,
                  results_dir: Path | None = None) -> tuple[RunRecord, dict[str, str]]:
    """``run`` as published, checked as any record read: the model named ``model_name`` (``--model-name`` of
    push-results, export-eee; else as every output names it, naming.display_name), model and data named publicly, no
    local path in any string, the run id its public identity hashes to (its samples' too); and every replacement made
    (a local path or the run id -> its public form)."""
    name = model_name if model_name is not None else display_name(run.model)
    if not (run.model.name is None and name == run.model.name_or_path):  # a Hub id named by itself stays unnamed
        run = replace(run, model=replace(run.model, name=name))
    replacements = local_replacements(run, results_dir)
    doc = _scrub(run.to_json(), replacements)
    if is_local_model(run.model):  # even where name and folder are alike
        doc["model"]["local_folder"] = True  # named by its folder; files_sha256 identifies the weights
    if run.data.source in replacements:
        doc["data"]["local_folder"] = True
    if doc.get("run_identity") != run.identity:  # local paths replaced in it: the run id it hashes to
        doc["run_id"] = run_id(doc["run_identity"])
    renamed = {run.run_id: doc["run_id"]} if doc["run_id"] != run.run_id else {}
    # The checked lines (a version-0 line with the run id it was read with), under the published run id.
    samples = {k: [{**line, "run_id": doc["run_id"]} for line in lines] for k, lines in run.samples.items()}
    published = parse_record(run.path, doc, partial=True, in_memory=samples)
    published.notes = list(run.notes)  # what the reader found in the file (its flag): the published form derives it
    return published, {**replacements, **renamed}


def public_lines(lines: list[dict], replacements: dict[str, str]) -> bytes:
    """A published samples file: its checked lines, as the runner writes them, with the local paths replaced (in raw
    and JSON-escaped form)."""
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    for path, name in replacements.items():
        text = (text.replace(json.dumps(path), json.dumps(name)) if _bare(path)
                else text.replace(path, name).replace(json.dumps(path)[1:-1], name))
    return text.encode("utf-8", errors="surrogateescape")


# A path of some machine: absolute POSIX (two parts at least, after a space, quote, bracket or the start of
# the text: "tokens/s", "</s>" or a URL are not), a home folder (~, ~user), or a Windows drive path.
_LOCAL_PATH = re.compile(
    r"(?:^|(?<=[\s\"'(\[=,;:]))(?:~[A-Za-z0-9._-]*/|/[A-Za-z0-9._@+-]+/[^\s\"'`)\]]*|/(?:root|home|Users)\b|[A-Za-z]:\\)"
)
_GENERIC_USERS = {"root", "user", "admin", "runner", "ubuntu", "jovyan", "nobody", "app"}  # words a text may hold


def local_trace(text: str) -> str | None:
    """The local path, home folder or user name ``text`` holds, or None."""
    found = _LOCAL_PATH.search(text)
    if found:
        return found.group(0)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        return None
    identifies = len(user) >= 3 and user.lower() not in _GENERIC_USERS  # not a generic account name
    return user if identifies and re.search(rf"(?<![A-Za-z0-9]){re.escape(user)}(?![A-Za-z0-9])", text) else None


def _json_strings(value: Any, where: str) -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _json_strings(v, f"{where}[{i}]")
    elif isinstance(value, dict):
        for k, v in value.items():
            yield f"{where}.{k}" if where else str(k), str(k)
            yield from _json_strings(v, f"{where}.{k}" if where else str(k))


def _traces(name: str, data: bytes) -> Iterable[tuple[str, str]]:
    """(field or line, text) of a published file: every string of a JSON file, every line of a card or YAML."""
    text = data.decode("utf-8", errors="replace")
    if name.endswith(".json"):
        with suppress(ValueError):  # not JSON: read as lines
            yield from _json_strings(json.loads(text), "")
            return
    for i, line in enumerate(text.splitlines(), 1):
        yield f"line {i}", line


def check_publishable(files: Iterable[tuple[str, bytes]], replacements: dict[str, str]) -> None:
    """Refuse (LocalPathLeft, one line naming the file and field) a file holding a known local path, or, in
    results.json, the aggregate and the cards (not the samples: generations and data are texts of their own),
    any other local absolute path, home folder or this user's name."""
    files = list(files)
    for name, data in files:  # a known local path, in a field this module does not know yet
        for path in (p for p in replacements if not _bare(p)):  # a bare name inside words is no path
            if path.encode("utf-8") in data or json.dumps(path)[1:-1].encode("utf-8") in data:
                raise LocalPathLeft(f"{name}: still contains the local path {path!r}; not published")
    # the record first: a trace in results.json is named by its field, not by the card line rendered from it
    for name, data in sorted(files, key=lambda f: (not f[0].endswith(".json"), f[0])):
        if name.endswith(".jsonl"):
            continue
        for field, text in _traces(name, data):
            trace = local_trace(text)
            if trace is not None:
                raise LocalPathLeft(f"{name}: {field} holds {trace!r}, a local path or user name; "
                                    "remove it from the run's results.json, then publish again")


def model_label(model: ModelRecord) -> str:
    """The model as a card or table names it (naming.display_name): ``--model-name``'s name, ``org/name@rev``,
    or ``plain-3f2a9c1e (local folder)`` (a local folder's name and the first digits of its weights' sha256)."""
    name = display_name(model)
    if is_local_model(model):
        return f"{name} (local folder)"
    return f"{name}@{model.revision}" if model.revision and name == model.name_or_path else name

"""Folder names of a run (``run_folder``: ``run``'s default ``--output-dir`` and ``push-results``), never shared by
runs of one model in different settings, few-shot counts or splits; and the model as every output names it
(``display_name``, docs/push-results.md): a local folder's name carries its weights' hash, as ``plain`` alone would
name every converted model alike."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

_UNSAFE = re.compile(r"[^A-Za-z0-9_.@-]+")


def is_local(name_or_path: str) -> bool:
    """A model folder on this machine, not a Hub id (as ``run --model`` tells them apart)."""
    return name_or_path.startswith((".", "/", "~")) or Path(name_or_path).expanduser().exists()


def model_name(name_or_path: str) -> str:
    """The model as a reader names it: the Hub id, or a local folder's own name (never the whole local path)."""
    name = name_or_path.rstrip("/\\")
    return (Path(name).name if is_local(name) else name) or "model"


# results.json's model record: the name given with --model-name (no part of the run's identity).
NAME_FIELD = "name"
WEIGHTS_DIGITS = 8  # hex digits of the weights fingerprint in a local folder's default name


def check_given_name(name: object, key: str = "--model-name") -> str:
    """The one rule of a model's name, given (``--model-name``, RunSpec) or read back (results.json ``model.name``):
    one line of printable text; refused (ValueError naming ``key``) otherwise. Markup in it is escaped where written
    (reporting/tables.py md_text), never interpreted."""
    text = name.strip() if isinstance(name, str) else ""
    if not text or not text.isprintable() or len(text) > 200:
        raise ValueError(f"{key} {str(name)[:60]!r}: expected a non-empty name on one line (at most 200 characters)")
    return text


def _field(model: Mapping[str, Any] | Any, key: str) -> Any:
    """A model record's field: a results.json ``model`` mapping or the typed record (record/model.py)."""
    return model.get(key) if isinstance(model, Mapping) else getattr(model, key, None)


def given_name(model: Mapping[str, Any] | Any) -> str | None:
    value = _field(model, NAME_FIELD)
    return value.strip() if isinstance(value, str) and value.strip() else None


def is_local_model(model: Mapping[str, Any] | Any) -> bool:
    """A model record of a local folder or file: published records say so (``local_folder``), a run's record
    carries the weights' fingerprint (``files_sha256``/``file_sha256``) that only local models have."""
    return (bool(_field(model, "local_folder")) or bool(_field(model, "files_sha256") or _field(model, "file_sha256"))
            or is_local(str(_field(model, "name_or_path") or "model")))


def display_name(model: Mapping[str, Any] | Any) -> str:
    """The model as every output names it: the given name, the Hub id, or ``<folder>-<weights hash>``."""
    given = given_name(model)
    if given is not None:
        return given
    name = str(_field(model, "name_or_path") or "model")
    if not is_local_model(model):
        return name
    digest = _field(model, "files_sha256") or _field(model, "file_sha256")
    folder = model_name(name)
    return f"{folder}-{digest[:WEIGHTS_DIGITS]}" if isinstance(digest, str) and digest else folder


def model_slug(name_or_path: str, revision: str | None = None) -> str:
    """Path-safe name of the model (and revision, if any)."""
    name = model_name(name_or_path).replace("/", "__")
    slug = _UNSAFE.sub("_", f"{name}@{revision}" if revision else name)
    return slug.strip(".") or "model"  # never "." or ".."


def setting_slug(setting: str | None, constrained: bool = False, num_fewshot: int = 0, split: str | None = None) -> str:
    """``ce-constrained``, ``loglikelihood-5shot``, ``loglikelihood-dev``, ..."""
    parts = [setting or "loglikelihood"] + (["constrained"] if constrained else [])
    parts += [f"{num_fewshot}shot"] if num_fewshot else []
    parts += [_UNSAFE.sub("_", split).replace("@", "_")] if split else []
    return "-".join(parts)


def run_folder(model: Mapping[str, Any] | Any, config: Mapping[str, Any] | Any, rid: str) -> str:
    """``<model>[@rev]/<setting>[-constrained][-<k>shot][-<split>][-thinking]-<run id>`` of a run identity or a
    results.json's ``model`` and ``config``: a local run's default folder and its folder in a results repository."""
    setting = setting_slug(_field(config, "setting"), bool(_field(config, "constrained")),
                           int(_field(config, "num_fewshot") or 0), _field(config, "split"))
    thinking = "-thinking" if _field(config, "thinking") else ""
    slug = model_slug(str(_field(model, "name_or_path") or "model"), _field(model, "revision"))
    return f"{slug}/{setting}{thinking}-{rid}"

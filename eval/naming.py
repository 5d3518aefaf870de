"""Folder names of a run, shared by ``run``'s default ``--output-dir`` and ``push-results``.

``<model>[@<revision>]/<setting>[-constrained][-<k>shot][-<split>]``: runs of one model in
different settings, few-shot counts or splits never share a folder, so none overwrites
another. ``<model>`` is a Hub id with ``/`` as ``__`` (``org__name``), or a local folder's
own name.
"""

from __future__ import annotations

import re
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9_.@-]+")


def is_local(name_or_path: str) -> bool:
    """A model folder on this machine, not a Hub id (as ``run --model`` tells them apart)."""
    return name_or_path.startswith((".", "/", "~")) or Path(name_or_path).expanduser().exists()


def model_name(name_or_path: str) -> str:
    """The model as a reader names it: the Hub id, or a local folder's own name (never the whole local path)."""
    name = name_or_path.rstrip("/\\")
    return (Path(name).name if is_local(name) else name) or "model"


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


def run_folder(model: dict, config: dict) -> str:
    """``<model>[@rev]/<setting...>`` of a results.json's ``model`` and ``config`` objects."""
    return (f"{model_slug(str(model.get('name_or_path') or 'model'), model.get('revision'))}/"
            f"{setting_slug(config.get('setting'), bool(config.get('constrained')), int(config.get('num_fewshot') or 0), config.get('split'))}")

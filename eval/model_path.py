"""``--model`` checked before anything heavy (no torch, no weights read): one line saying what to pass for what users
gave (issue 32): a folder that is not a model (``raw/sa``), a weights file given for its folder (transformers would read
it whole as a config), a GGUF file missing or without its loader's packages, a name neither a path nor a Hub id."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Sequence

CONFIG = "config.json"
CONFIG_MAX_BYTES = 1 << 20  # a model's config.json is a few kB: a larger one is no config
# What transformers needs to load a GGUF file (pyproject's gguf extra installs them).
GGUF_NEEDS = ("gguf", "accelerate")
GGUF_INSTALL = "pip install -e '.[gguf]' (in a clone of evalita-llm)"


class ModelPathError(ValueError):
    """A --model that cannot be a model; ``usage``: the fault is the argument itself (exit 2), else an install."""

    def __init__(self, message: str, usage: bool = True) -> None:
        super().__init__(message)
        self.usage = usage


def check_model_path(model: str, backend_args: Sequence[str] = ()) -> None:
    """Raise ModelPathError when ``model`` cannot be what ``--model`` loads; a Hub id is left to the Hub.
    ``backend_args``: the run's ``--backend-arg KEY=VALUE`` list (``gguf_file=`` names the GGUF inside a folder)."""
    from .backend_support.gguf import is_gguf_path

    path = Path(model).expanduser()
    if is_gguf_path(model):
        if not path.is_file():
            raise ModelPathError(f"{model}: no such GGUF file")
        _require_gguf(model)
        return
    if path.is_file() and (path.parent / CONFIG).is_file():  # the folder that holds it is what to pass
        raise ModelPathError(f"{model} is a file: pass the model folder that holds it and its {CONFIG}: --model "
                             f"{Path(model).parent}")
    if path.is_file():
        raise ModelPathError(f"{model} is a file, not a model: pass a model folder (with {CONFIG} and the weights), a "
                             ".gguf file or a Hub id")
    if path.is_dir():
        if any(a.startswith("gguf_file=") for a in backend_args):
            _require_gguf(model)
            return
        _check_folder(model, path)
        return
    if model.startswith((".", "/", "~")) or model.count("/") > 1 or not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", model):
        raise ModelPathError(f"{model}: no such model folder (and not a Hub model id such as org/name)")


def _require_gguf(model: str) -> None:
    missing = [m for m in GGUF_NEEDS if importlib.util.find_spec(m) is None]
    if "gguf" in missing:  # the message of backend_support/gguf.py's require_gguf, which tests and users know
        raise ModelPathError(f"--model {model} needs the gguf package: {GGUF_INSTALL}", usage=False)
    if missing:
        raise ModelPathError(f"--model {model} needs {', '.join(missing)} (transformers loads GGUF files with it): "
                             f"{GGUF_INSTALL}", usage=False)


def _check_folder(model: str, path: Path) -> None:
    config = path / CONFIG
    if config.is_file():
        if config.stat().st_size > CONFIG_MAX_BYTES:
            raise ModelPathError(f"{config}: {config.stat().st_size} bytes, not a model's {CONFIG}: is --model the "
                                 "right folder?")
        try:
            ok = isinstance(json.loads(config.read_text("utf-8")), dict)
        except (UnicodeDecodeError, json.JSONDecodeError):
            ok = False
        if not ok:
            raise ModelPathError(f"{config}: not a JSON object, so {model} is not a usable model folder")
        return
    ggufs = sorted(p.name for p in path.iterdir() if p.is_file() and p.name.lower().endswith(".gguf"))
    if ggufs:
        raise ModelPathError(f"{model} has no {CONFIG}; it holds {', '.join(ggufs[:3])}: pass the GGUF file itself: "
                             f"--model {Path(model) / ggufs[0]}")
    inner = sorted(p.name for p in path.iterdir() if p.is_dir() and (p / CONFIG).is_file())
    if inner:
        raise ModelPathError(f"{model} has no {CONFIG}, but {', '.join(inner[:3])} inside it is a model folder: "
                             f"--model {Path(model) / inner[0]}")
    raise ModelPathError(f"{model} is not a model folder: no {CONFIG} in it (pass a Hugging Face model folder, with "
                         f"{CONFIG} and the weights, a .gguf file, or a Hub id such as org/name)")

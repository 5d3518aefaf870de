"""GGUF model files (llama.cpp's single-file format) as ``--model`` (docs/evaluator.md#gguf-models)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..api import backend_option

SUFFIX = ".gguf"


@dataclass(frozen=True)
class GGUFModel:
    """Where a GGUF model is: ``source`` (a folder or Hub id, what ``from_pretrained`` takes) and ``file`` (its
    ``gguf_file`` argument); ``local_path``: the file on disk, None for a Hub file not downloaded yet."""

    source: str
    file: str
    local_path: Path | None

    @property
    def location(self) -> str:
        """The file itself: its path, or ``source/file`` on the Hub (a tokenizer built from it is named so)."""
        return str(self.local_path or f"{self.source}/{self.file}")


def is_gguf_path(model: str) -> bool:
    return model.lower().endswith(SUFFIX)


def gguf_model(model: str, extra: Mapping[str, Any] | None = None) -> GGUFModel | None:
    """The GGUF model that ``--model`` and ``--backend-arg gguf_file=`` name, or None for a plain model; a ValueError
    for a GGUF named twice or a bad ``gguf_file``, FileNotFoundError for a ``--model X.gguf`` that is not a file."""
    named = (extra or {}).get("gguf_file")
    if is_gguf_path(model):
        if named is not None:
            raise ValueError(f"--model {model} is a GGUF file already; drop --backend-arg gguf_file={named}")
        path = Path(model).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"--model {model}: no such GGUF file")
        path = path.resolve()
        return GGUFModel(str(path.parent), path.name, path)
    if named is None:
        return None
    if not isinstance(named, str) or not is_gguf_path(named) or Path(named).is_absolute() or ".." in Path(named).parts:
        raise ValueError(f"--backend-arg gguf_file={named!r}: expected the name of a .gguf file inside {model}")
    local = Path(model).expanduser() / named
    return GGUFModel(model, named, local.resolve() if local.is_file() else None)


def pretrained_source(model: str, gguf: GGUFModel | None) -> tuple[str, dict[str, str]]:
    """What ``from_pretrained`` takes for ``--model``: its name, or a GGUF file's folder or Hub id and ``gguf_file``."""
    return (model, {}) if gguf is None else (gguf.source, {"gguf_file": gguf.file})


def require_gguf(model: str) -> None:
    """Stop with the install hint, not transformers' error about a config file, when ``gguf`` is missing."""
    if importlib.util.find_spec("gguf") is None:
        raise RuntimeError(f"--model {model} needs the gguf package: pip install -e '.[gguf]' (in a clone of "
                           "evalita-llm)")


def gguf_file_option() -> Any:
    """The ``gguf_file`` field of the ``Options`` of the backends that load GGUF (hf, vllm)."""
    return backend_option(None, "a .gguf file inside --model (a folder or Hub id) to load; --model X.gguf names one "
                          "directly")

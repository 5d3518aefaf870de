"""The backend registry: every module in this package registers its backends by name.

A module defines a :class:`evalita_eval.api.Backend` subclass and decorates it with
``@register_backend("name")``. Modules must import heavy libraries (torch, vllm,
httpx...) inside methods only, so that listing the backends costs nothing.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..api import Backend, BackendOptions

_REGISTRY: dict[str, type[Backend]] = {}
_DISCOVERED = False


def register_backend(name: str):
    """Class decorator: make a Backend subclass available as ``--backend NAME``."""

    def wrap(cls: type[Backend]) -> type[Backend]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise RuntimeError(f"backend name {name!r} is registered twice: {_REGISTRY[name].__module__} and {cls.__module__}")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return wrap


def _discover() -> None:
    global _DISCOVERED
    if _DISCOVERED:
        return
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    _DISCOVERED = True


def backend_names() -> list[str]:
    _discover()
    return sorted(_REGISTRY)


def get_backend_class(name: str) -> type[Backend]:
    _discover()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown backend {name!r}; available: {', '.join(sorted(_REGISTRY))}") from None


def create_backend(name: str, options: BackendOptions) -> Backend:
    backend = get_backend_class(name).from_options(options)
    backend.options = options  # what it was built from: part of its cache identity
    return backend

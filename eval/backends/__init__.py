"""The backend registry (docs/adding-a-backend.md): every module in this package, and every module or class named by
an ``evalita_llm.backends`` entry point, registers its backends by name. Modules import heavy libraries (torch,
vllm...) inside methods only, so that listing the backends costs nothing."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from ..api import Backend, BackendOptions
from ..backend_support.options import resolve_options

ENTRY_POINT_GROUP = "evalita_llm.backends"
_REGISTRY: dict[str, type[Backend]] = {}
_DISCOVERED = False


def register_backend(name: str):
    """Class decorator: make a Backend subclass available as ``--backend NAME``."""

    def wrap(cls: type[Backend]) -> type[Backend]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise RuntimeError(f"backend name {name!r} is registered twice: {_REGISTRY[name].__module__} and "
                               f"{cls.__module__}")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return wrap


def _discover() -> None:
    """Import every module of this package, then every entry point of ``ENTRY_POINT_GROUP``: a module that registers its
    backends, or a Backend subclass, registered under the entry point's name unless it registered itself."""
    global _DISCOVERED
    if _DISCOVERED:
        return
    for info in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{info.name}")
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP})"
        try:
            loaded = ep.load()
        except ImportError as err:
            raise ImportError(f"{where}: cannot import it: {err}") from err
        if isinstance(loaded, type) and issubclass(loaded, Backend):
            if loaded not in _REGISTRY.values():
                register_backend(ep.name)(loaded)
        elif not isinstance(loaded, ModuleType):
            raise RuntimeError(f"{where} must name a module that registers backends or a Backend subclass, not "
                               f"{type(loaded).__name__}")
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
    """The backend ``name`` built from ``options``, its ``Options`` typed from --backend-arg (``resolve_options``)."""
    cls = get_backend_class(name)
    options, _ = resolve_options(cls, options)
    backend = cls.from_options(options)  # options.engine: its typed Options
    backend.options = options  # what it was built from (with ``engine``): part of its cache identity
    return backend

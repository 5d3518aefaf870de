"""Data-parallel replicas of a backend on Ray (``--backend-arg data_parallel_size=N``; docs/parallel.md).

``create_backend``: the backend itself for one replica, else a ``ReplicaBackend`` (backend.py) over N Ray actors."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from ..api import Backend, BackendOptions

# The options read here, taken out before the backend sees them (they change no number), and their types.
REPLICA_OPTIONS: dict[str, Any] = {"data_parallel_size": Annotated[int, Field(ge=1)], "ray_address": str | None}


def replica_args(extra: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the replicas' options of ``extra`` typed, the backend's own); a ValueError naming a wrong value."""
    from ..backend_support.options import expected

    ours = {}
    for name, kind in REPLICA_OPTIONS.items():
        if name in extra:
            try:
                ours[name] = TypeAdapter(kind).validate_python(extra[name])
            except ValidationError as err:
                said = expected(err.errors()[0])
                raise ValueError(f"--backend-arg {name}: {said} (the replicas of the model)") from None
    return ours, {k: v for k, v in extra.items() if k not in REPLICA_OPTIONS}


def replica_settings(options: BackendOptions) -> tuple[int, str | None, BackendOptions]:
    """(replicas, Ray address or None, one replica's options) from ``data_parallel_size`` and ``ray_address``."""
    ours, extra = replica_args(options.extra)
    return ours.get("data_parallel_size", 1), ours.get("ray_address") or None, replace(options, extra=extra)


def create_backend(name: str, options: BackendOptions) -> Backend:
    """The backend ``name``, replicated on Ray when ``data_parallel_size`` > 1 (or a Ray address is given)."""
    from ..backends import create_backend as create_one

    size, address, one = replica_settings(options)
    if size == 1 and address is None:
        return create_one(name, one)
    if importlib.util.find_spec("ray") is None:
        raise RuntimeError(f"data_parallel_size={size} runs replicas on Ray, which is not installed: "
                           "pip install -e '.[ray]' (in a clone of evalita-llm)")
    from .backend import ReplicaBackend

    return ReplicaBackend(name, one, size, address)

"""Data-parallel replicas of a backend on Ray (``--backend-arg data_parallel_size=N``; docs/parallel.md).

``create_backend`` is the CLI's entry: the backend itself for one replica, else a
``ReplicaBackend`` (backend.py) over N Ray actors on a local Ray started for the run or on
the cluster at ``--backend-arg ray_address=ADDRESS``. Ray is the optional extra ``ray``.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace

from ..api import Backend, BackendOptions
from ..config_file import short

# The options read here, taken out before the backend sees them: they change no number.
REPLICA_OPTIONS = ("data_parallel_size", "ray_address")


def replica_settings(options: BackendOptions) -> tuple[int, str | None, BackendOptions]:
    """(replicas, Ray address or None, the options of one replica) from ``--backend-arg
    data_parallel_size=N`` / ``--data-parallel-size N`` and ``ray_address=ADDRESS``."""
    extra = dict(options.extra)
    raw = extra.pop("data_parallel_size", 1)
    address = extra.pop("ray_address", None) or None
    try:
        size = int(str(raw).strip())
    except ValueError:
        size = 0
    if size < 1:
        raise ValueError(f"--backend-arg data_parallel_size={short(raw)}: expected a whole number >= 1 "
                         "(the replicas of the model)")
    return size, address, replace(options, extra=extra)


def create_backend(name: str, options: BackendOptions) -> Backend:
    """The backend ``name``, replicated on Ray when ``data_parallel_size`` > 1 (or a Ray address is given)."""
    from ..backends import create_backend as create_one

    size, address, one = replica_settings(options)
    if size == 1 and address is None:
        return create_one(name, one)
    if importlib.util.find_spec("ray") is None:
        raise RuntimeError(f"data_parallel_size={size} runs replicas on Ray, which is not installed: pip install -e '.[ray]' (in a clone of evalita-llm)")
    from .backend import ReplicaBackend

    return ReplicaBackend(name, one, size, address)

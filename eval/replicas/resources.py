"""What a run's replicas (and a sweep's runs) reserve, compared with what there is, before anything starts (this
machine's when Ray is started here, else the cluster's): asking for more is one line, never a local Ray sized to the
request that spawns workers until memory runs low."""

from __future__ import annotations

import importlib.util
import os
from typing import Any


class NotEnoughResources(ValueError):
    """More CPUs or GPUs asked for than there are."""


def machine_resources() -> dict[str, float]:
    """This machine's CPUs and the GPUs torch sees (none without torch or CUDA)."""
    gpus = 0
    if importlib.util.find_spec("torch") is not None:
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return {"CPU": float(os.cpu_count() or 1), "GPU": float(gpus)}


def cluster_resources() -> dict[str, float]:
    """The CPUs and GPUs of the Ray cluster this process is connected to."""
    import ray

    have = ray.cluster_resources()
    return {"CPU": float(have.get("CPU", 0)), "GPU": float(have.get("GPU", 0))}


def check_room(what: str, cpus: float, gpus: float, have: dict[str, float], where: str) -> None:
    """``what`` (``data_parallel_size=4: 4 replicas``) needs ``cpus`` CPUs and ``gpus`` GPUs; ``have``: ``where``'s."""
    short = [f"{need:g} {kind}s ({where} has {have[kind]:g})" for kind, need in (("CPU", cpus), ("GPU", gpus))
             if need > have[kind]]
    if short:
        raise NotEnoughResources(f"{what} need {' and '.join(short)}; nothing was started")


def node_name() -> str:
    """The Ray node this process runs on: its IP and the start of its id."""
    import ray

    return f"{ray.util.get_node_ip_address()} {ray.get_runtime_context().get_node_id()[:8]}"


def unreadable(paths: dict[str, str]) -> str | None:
    """One line naming this Ray node and the first of ``paths`` (what -> path, as the driver sees it) it cannot read,
    else None: a cluster's nodes must see the models and data at the driver's paths (shared storage)."""
    for what, path in paths.items():
        if not os.access(path, os.R_OK):
            return (f"node {node_name()} cannot read the {what} {path}: every node of the cluster needs it at that "
                    "path (shared storage)")
    return None


def check_replicas_room(size: int, resources: dict[str, Any], have: dict[str, float], where: str) -> None:
    """N replicas need a CPU each (CPU replicas share --threads cores) and their GPUs."""
    gpus = float(size * resources["num_gpus"])
    check_room(f"data_parallel_size={size}: {size} replicas", float(size), gpus, have, where)


def driver_threads() -> int | None:
    """torch's intra-op threads in this process (what one replica run here would use)."""
    try:
        import torch
    except ImportError:
        return None
    return torch.get_num_threads()

"""The Ray node of each replica of a ``ReplicaBackend`` (IP and id), once its model is loaded: an actor runs a call
only after its constructor (the replica's model load)."""

from __future__ import annotations

from typing import Any


def replica_nodes(backend: Any) -> list[str]:
    import ray

    from evalita_eval.replicas.resources import node_name

    return ray.get([actor.__ray_call__.remote(lambda replica: node_name()) for actor in backend.actors])

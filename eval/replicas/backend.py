"""``ReplicaBackend``: N replicas of a backend as Ray actors, behind the ``Backend`` protocol.

Each replica builds the wrapped backend once (its model loaded once for the whole run) in
an actor that reserves its devices through Ray's resources. A call (with ``calls``: every call
of the run's stream at once, running/stream.py) is cut into units
(``plan.py``: the inner calls one replica would make, prefix groups kept together; for an
engine with a prefix cache, vllm, ``prefix_groups.py``: what its cache can share kept
together, a replica's units then merged into large calls), the
units spread over the replicas by counted tokens, and every result handed to the runner's
``on_result`` as its unit finishes: the driver alone writes the resume cache. A replica
that dies is started again and given only its units without a result; a unit's results
are reported once, so nothing is lost or counted twice.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from ..api import Backend, BackendOptions, GenRequest, LLRequest, RequestKind, method_of
from .plan import Unit, assign, plan_units
from .prefix_groups import prefix_units
from .ray_start import start_ray, use_token_if_present
from .resources import NotEnoughResources, check_room, cluster_resources, machine_resources

# Restarts of one replica within a run before the run fails (a replica that keeps dying is a bug, not bad luck).
MAX_RESTARTS = 3


class Replica:
    """One replica (a Ray actor): the wrapped backend and the units it runs."""

    def __init__(self, name: str, options: BackendOptions, threads: int | None) -> None:
        from ..backends import create_backend

        if threads is not None:
            import torch

            # Ray sets OMP_NUM_THREADS=1 in an actor; CPU kernels round differently with another
            # thread count, so a replica takes the driver's: the numbers of one replica.
            torch.set_num_threads(threads)
        self.backend = create_backend(name, options)

    def describe(self) -> dict[str, Any]:
        """What the driver shows of the backend: identity, dtype, capabilities, chat template, pid."""
        b = self.backend
        import pickle

        tokenizer = b.tokenizer
        try:  # the driver counts tokens (estimates) and names the chat template with it
            pickle.dumps(tokenizer)
        except Exception:  # an engine's tokenizer that does not travel: the driver does without
            tokenizer = None
        return {"identity": b.cache_identity(), "dtype": b.dtype, "capabilities": b.capabilities, "pid": os.getpid(), "tokenizer": tokenizer,
                "requests_per_call": b.requests_per_call, "merges_units": self._prefix_cached,
                "mixes_prompts": b.mixes_prompts}

    @property
    def _prefix_cached(self) -> bool:
        """An engine with a prefix cache (vllm): units by shared first blocks, merged into large calls."""
        return hasattr(self.backend, "prefix_block_size")

    def plan(self, kind: str, requests: Sequence[Any], replicas: int = 1) -> list[Unit]:
        if self._prefix_cached:
            return prefix_units(self.backend, kind, requests, replicas)
        return plan_units(self.backend, kind, requests)

    def plan_calls(self, kind: str, requests: Sequence[Any], calls: Sequence[Sequence[int]], replicas: int = 1) -> list[Unit]:
        """The units of each of ``calls`` (request indices), planned as for a call of those
        requests alone, their indices those of ``requests``: the units of the whole run."""
        units: list[Unit] = []
        for call in calls:
            for unit in self.plan(kind, [requests[i] for i in call], replicas):
                units.append(Unit(tuple(tuple(call[i] for i in inner) for inner in unit.calls), unit.tokens))
        return units

    def engine_counters(self) -> dict[str, float]:
        """The engine's own cumulative counters (vllm: prompt tokens, of them from the prefix cache...)."""
        return self.backend.engine_counters()

    def run_unit(self, kind: str, requests: Sequence[Any], calls: Sequence[Sequence[int]]) -> list[Any]:
        """The values of the unit's requests, call after call, in ``Unit.indices`` order."""
        method = method_of(self.backend, kind)
        values: list[Any] = []
        for call in calls:
            values += method([requests[i] for i in call])
        return values

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return self.backend.apply_chat_template(messages)

    def close(self) -> None:
        self.backend.close()


def replica_resources(name: str, options: BackendOptions) -> dict[str, Any]:
    """Ray resources of one replica: ``tensor_parallel_size`` GPUs (vllm) or one GPU (a CUDA
    device), else (``--device cpu``) one CPU, or ``--threads`` CPUs when given."""
    if options.device != "cpu":
        gpus = _tensor_parallel_size(options) if name == "vllm" else 1
        return {"num_cpus": 1, "num_gpus": gpus}
    return {"num_cpus": options.threads or 1, "num_gpus": 0}


def _tensor_parallel_size(options: BackendOptions) -> int:
    """vllm's GPUs per replica, typed as its Options declare it (``--backend-arg tensor_parallel_size``)."""
    from ..backends import engine_settings

    return engine_settings("vllm", options).tensor_parallel_size


def check_replicas_room(size: int, resources: dict[str, Any], have: dict[str, float], where: str) -> None:
    """N replicas need a CPU each (CPU replicas share --threads cores) and their GPUs."""
    check_room(f"data_parallel_size={size}: {size} replicas", float(size), float(size * resources["num_gpus"]), have, where)


class ReplicaBackend(Backend):
    """The wrapped backend's name, identity and capabilities; its calls run on the replicas."""

    # Every kind reported as each unit finishes; the runner's calls taken whole and shared out over the replicas.
    streams = frozenset(RequestKind)
    plans_calls = True

    def __init__(self, name: str, options: BackendOptions, size: int, address: str | None) -> None:
        use_token_if_present(address)  # before Ray reads its configuration
        import ray

        self.name, self.size, self._inner_options = name, size, options
        self._threads = options.threads or _driver_threads() if options.device == "cpu" else None
        self._started_ray = not ray.is_initialized()
        resources = replica_resources(name, options)
        if self._started_ray and not address:  # checked before Ray starts: a local Ray sized to the request would spawn them
            check_replicas_room(size, resources, machine_resources(), "this machine")
        if self._started_ray:
            # A local Ray for this run: room for every replica even on fewer cores (CPU replicas share --threads).
            # start_ray: a Ray of our own ("local") or the cluster at address; a start that fails is one line.
            start_ray(address, include_dashboard=False, log_to_driver=False, configure_logging=False,
                      **({} if address else {"num_cpus": max(os.cpu_count() or 1, int(size * resources["num_cpus"]))}))
        if address or not self._started_ray:  # a cluster (or a Ray this process joined already): what it reports
            try:
                check_replicas_room(size, resources, cluster_resources(), f"the Ray cluster at {address or 'this process'}")
            except NotEnoughResources:
                if self._started_ray:
                    ray.shutdown()
                raise
        self.loads = 0  # replicas started (N, plus one per restart): each loads its model once
        self.units_done = [0] * size  # units each replica finished (the tests see the work spread)
        self.actors = [self._start() for _ in range(size)]
        described = ray.get(self.actors[0].describe.remote())
        self._identity, self.dtype, self.capabilities = described["identity"], described["dtype"], described["capabilities"]
        # The replicas' tokenizer: the runner names the chat template with it, the estimate counts tokens.
        self.tokenizer = described["tokenizer"]
        # A runner that does not stream to us cuts calls as it would for one replica (plan.chunk_size).
        self.requests_per_call = described["requests_per_call"]
        self._merges_units = described["merges_units"]
        # The runner may mix prompts in one call exactly where the wrapped engine allows it (running/stream.py).
        self.mixes_prompts = described["mixes_prompts"]

    @classmethod
    def from_options(cls, options: BackendOptions) -> "ReplicaBackend":
        raise TypeError("ReplicaBackend is built by evalita_eval.replicas.create_backend")

    @property
    def replicas(self) -> int:
        return self.size

    def _start(self) -> Any:
        import ray

        self.loads += 1
        resources = replica_resources(self.name, self._inner_options)
        if self._threads is not None:  # before torch loads: OpenMP reads it once (Ray sets 1)
            resources["runtime_env"] = {"env_vars": {"OMP_NUM_THREADS": str(self._threads)}}
        return ray.remote(Replica).options(max_restarts=0, **resources).remote(self.name, self._inner_options, self._threads)

    def cache_identity(self) -> dict[str, Any]:
        return dict(self._identity)  # one replica's: replicas must not change a number

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        import ray

        return ray.get(self.actors[0].apply_chat_template.remote(messages))

    # ``calls``: the calls the runner would make to one backend (request indices; None: one call of
    # every request). The replicas plan each as one replica would and share all their units.
    def loglikelihood(self, requests: Sequence[LLRequest], on_result: Callable[[int, Any], None] | None = None,
                      calls: Sequence[Sequence[int]] | None = None) -> list[Any]:
        return self._dispatch(RequestKind.LOGLIKELIHOOD, requests, on_result, calls)

    def generate_until(self, requests: Sequence[GenRequest], on_result: Callable[[int, Any], None] | None = None,
                       calls: Sequence[Sequence[int]] | None = None) -> list[Any]:
        return self._dispatch(RequestKind.GENERATE, requests, on_result, calls)

    def _dispatch(self, kind: str, requests: Sequence[Any], on_result: Callable[[int, Any], None] | None,
                  calls: Sequence[Sequence[int]] | None = None) -> list[Any]:
        import ray

        if not requests:
            return []
        shared = ray.put(list(requests))
        whole = [list(c) for c in calls] if calls is not None else [list(range(len(requests)))]
        units = self._call(0, lambda actor: actor.plan_calls.remote(kind, shared, whole, self.size))
        shards = assign([u.tokens for u in units], self.size)
        out: list[Any] = [None] * len(requests)
        running: dict[Any, tuple[int, list[int]]] = {}  # future -> (replica, its units)

        def submit(replica: int, todo: Sequence[int]) -> None:
            for pack in self._packs(units, todo):
                calls = units[pack[0]].calls if len(pack) == 1 else (tuple(i for u in pack for i in units[u].indices),)
                running[self.actors[replica].run_unit.remote(kind, shared, calls)] = (replica, pack)

        for replica, todo in enumerate(shards):
            submit(replica, todo)
        restarts = [0] * self.size
        while running:
            [future], _ = ray.wait(list(running), num_returns=1)
            replica, pack = running.pop(future)
            try:
                values = ray.get(future)
            except ray.exceptions.RayActorError:
                # The replica died: a new one takes every unit of it still without a result.
                lost = [f for f, (r, _) in running.items() if r == replica]
                left = sorted(pack + [u for f in lost for u in running.pop(f)[1]])
                restarts[replica] += 1
                if restarts[replica] > MAX_RESTARTS:
                    raise RuntimeError(f"replica {replica} of backend {self.name!r} died {restarts[replica]} times; the run stops") from None
                self.actors[replica] = self._start()
                submit(replica, left)
                continue
            except ray.exceptions.RayTaskError as err:
                raise err.as_instanceof_cause() from None  # the backend's own error (a ValueError...), as one replica raises it
            self.units_done[replica] += len(pack)
            for i, value in zip((i for u in pack for i in units[u].indices), values):
                out[i] = value
                if on_result is not None:
                    on_result(i, value)
        return out

    def _packs(self, units: Sequence[Unit], todo: Sequence[int]) -> list[list[int]]:
        """A replica's units as submitted: one by one, or (an engine that batches what it is
        given: vllm) merged in order into calls of at most ``requests_per_call`` requests."""
        if not self._merges_units:
            return [[u] for u in todo]
        packs: list[list[int]] = []
        size, limit = 0, self.requests_per_call or 1
        for u in todo:
            n = len(units[u].indices)
            if not packs or size + n > limit:
                packs.append([])
                size = 0
            packs[-1].append(u)
            size += n
        return packs

    def _call(self, replica: int, call: Callable[[Any], Any]) -> Any:
        """``call(actor)`` on a replica, started again if it died (up to MAX_RESTARTS times)."""
        import ray

        for _ in range(MAX_RESTARTS):
            try:
                return ray.get(call(self.actors[replica]))
            except ray.exceptions.RayActorError:
                self.actors[replica] = self._start()
        return ray.get(call(self.actors[replica]))

    def replica_engine_counters(self) -> list[dict[str, float]]:
        """Each replica's engine counters (vllm: ``VLLMBackend.engine_counters``)."""
        import ray

        return ray.get([actor.engine_counters.remote() for actor in self.actors])

    def engine_counters(self) -> dict[str, float]:
        """The replicas' engine counters summed: the engine work of the whole call, as one replica reports it."""
        each = self.replica_engine_counters()
        return {name: sum(c[name] for c in each) for name in each[0]}

    def close(self) -> None:
        import ray

        if not ray.is_initialized():
            return
        for actor in self.actors:
            try:
                ray.get(actor.close.remote())
            except ray.exceptions.RayError:
                pass  # a dead replica holds nothing
            ray.kill(actor)
        self.actors = []
        if self._started_ray:
            ray.shutdown()



def _driver_threads() -> int | None:
    """torch's intra-op threads in this process (what one replica run here would use)."""
    try:
        import torch
    except ImportError:
        return None
    return torch.get_num_threads()

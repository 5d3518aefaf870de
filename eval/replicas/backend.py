"""``ReplicaBackend``: N replicas of a backend, Ray actors (replica 0 in this process when the run starts its own Ray
on CPUs), behind the ``Backend`` protocol (docs/parallel.md): units (``plan.py``) shared from one queue, results
streamed to ``on_result``, a dead replica's unfinished units rerun."""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, wait
from functools import partial
from typing import Any, Callable, NamedTuple, Sequence

from ..api import Backend, BackendOptions, GenRequest, LLRequest, RequestKind, method_of
from .plan import Unit, assign, plan_units
from .prefix_groups import prefix_units
from .ray_start import start_ray, stop_ray, use_token_if_present
from ..backends import get_backend_class
from ..backends.hf_batches import token_budget_batches
from .resources import (check_replicas_room, cluster_resources, driver_threads, machine_resources,
                        unreadable)

# Restarts of one replica within a run before the run fails (a replica that keeps dying is a bug, not bad luck).
MAX_RESTARTS = 3
# Units a replica holds at once: the next one waits at the replica while one runs (no idle round trip), and every
# other unit stays in the driver's queue for whichever replica is free first.
IN_FLIGHT = 2
LOG = logging.getLogger(__name__)


class Replica:
    """One replica (a Ray actor): the wrapped backend and the units it runs."""

    def __init__(self, name: str, options: BackendOptions, threads: int | None, paths: dict[str, str]) -> None:
        from ..backends import create_backend

        began = time.time()
        # A node without the model folder: one line, said by the driver.
        self.loaded, self.problem = (began, began), unreadable(paths)
        if self.problem is not None:
            return
        if threads is not None:
            # Ray sets OMP_NUM_THREADS=1 in an actor; CPU kernels round differently with another thread count, so a
            # replica takes the driver's: the numbers of one replica. Set before torch loads (OpenMP reads it then),
            # here rather than in a runtime_env, which would need new workers instead of those Ray started idle.
            os.environ["OMP_NUM_THREADS"] = str(threads)
            import torch

            torch.set_num_threads(threads)
        self.backend = create_backend(name, options)
        self.loaded = (began, time.time())  # wall clock: the driver's timeline of the run (``ReplicaBackend.timeline``)

    def describe(self) -> dict[str, Any]:
        """What the driver shows of the backend: identity, dtype, capabilities, chat template."""
        if self.problem is not None:
            return {"problem": self.problem}
        import pickle

        b, tokenizer = self.backend, self.backend.tokenizer
        try:  # the driver counts tokens (estimates) and names the chat template with it
            pickle.dumps(tokenizer)
        except Exception:  # an engine's tokenizer that does not travel: the driver does without
            tokenizer = None
        return {"identity": b.cache_identity(), "dtype": b.dtype, "capabilities": b.capabilities, "loaded": self.loaded,
                "tokenizer": tokenizer, "num_parameters": b.num_parameters, "attention_span": b.attention_span,
                "requests_per_call": b.requests_per_call, "mixes_prompts": b.mixes_prompts,
                "merges_units": self._prefix_cached, "problem": self.problem}

    @property
    def _prefix_cached(self) -> bool:
        """An engine with a prefix cache (vllm): units by shared first blocks, merged into large calls."""
        return hasattr(self.backend, "prefix_block_size")

    def plan_calls(self, kind: str, requests: Sequence[Any], calls: Sequence[Sequence[int]], replicas: int = 1
                   ) -> list[list[Unit]]:
        """The units of each of ``calls`` (request indices), planned as for a call of those requests alone."""
        if self.problem is not None:  # a replica the driver did not ask first: its line at its first call
            raise RuntimeError(self.problem)
        plan = partial(prefix_units, replicas=replicas) if self._prefix_cached else plan_units
        return [[Unit(tuple(tuple(call[i] for i in inner) for inner in unit.calls), unit.tokens)
                 for unit in plan(self.backend, kind, [requests[i] for i in call])] for call in calls]

    def run_unit(self, kind: RequestKind, requests: Sequence[Any], calls: Sequence[Sequence[int]]
                 ) -> tuple[list, float, float]:
        """The values of the unit's requests, call after call, in ``Unit.indices`` order; when it began and ended."""
        if self.problem is not None:
            raise RuntimeError(self.problem)
        began = time.time()
        method = method_of(self.backend, kind)
        values: list[Any] = []
        for call in calls:
            values += method([requests[i] for i in call])
        return values, began, time.time()

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return self.backend.apply_chat_template(messages)

    def close(self) -> None:
        self.backend.close()


class Shared(NamedTuple):
    """A call's requests: the list for the replica in this process, the object ref (one copy in Ray) for the actors."""

    values: list
    ref: Any


class InProcess:
    """Replica 0 in this process: its calls one at a time in a daemon thread (torch computes without the GIL), each a
    ``Future`` the driver waits on beside the actors'; an interrupted run does not wait for the unit under way."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="replica-0", daemon=True).start()

    def submit(self, call: Callable[[], Any]) -> Future:
        future: Future = Future()
        self._calls.put((future, call))
        return future

    def _serve(self) -> None:
        while (item := self._calls.get()) is not None:
            future, call = item
            try:
                future.set_result(call())
            except BaseException as err:  # the replica's own error, raised where the driver waits for it
                future.set_exception(err)

    def stop(self) -> None:
        self._calls.put(None)


class ReplicaBackend(Backend):
    """The wrapped backend's name, identity and capabilities; its calls run on the replicas."""

    # Every kind reported as each unit finishes; the runner's calls taken whole and shared out over the replicas.
    streams = frozenset(RequestKind)
    plans_calls = True

    def __init__(self, name: str, options: BackendOptions, size: int, address: str | None) -> None:
        use_token_if_present(address)  # before Ray reads its configuration
        import ray

        began = time.time()
        self.name, self.replicas, self._inner_options = name, size, options  # replicas: results.json's config
        self._threads = options.threads or driver_threads() if options.device == "cpu" else None
        self._started_ray = not ray.is_initialized()
        self._resources = resources = get_backend_class(name).reservation(options)  # what one replica reserves
        # Checked before Ray starts: a local Ray sized to the request would spawn them.
        if self._started_ray and not address:
            check_replicas_room(size, resources, machine_resources(), "this machine")
        # Replica 0 in this process when the run starts its own Ray and a replica holds no GPU: it loads while Ray
        # starts and computes while the actors load (the same code and threads: the numbers of one replica).
        self._local = InProcess() if self._started_ray and not address and not resources["num_gpus"] else None
        # Where the run's time goes (wall clock, logged at close; bench/replicas.py --time prints it).
        self.timeline: dict[str, Any] = {"began": began, "calls": []}
        self.loads = 0  # replicas started (N, plus one per restart): each loads its model once
        self.restarts = [0] * size
        self.units_done = [0] * size  # units each replica finished (the tests see the work spread)
        self.actors: list[Any] = [None] * size  # the Ray actors (None: replica 0 in this process)
        self._described: list[Any] = [None] * size  # each replica's describe() future: done once its model is loaded
        self._loading: dict[Future, int] = {}  # describe future -> replica, until it is known loaded
        if self._local is not None:
            self._start(0)
        try:
            if self._started_ray:  # a local Ray: room for every replica even on fewer cores (CPU ones share threads)
                cpus = {} if address else {"num_cpus": max(os.cpu_count() or 1, int(size * resources["num_cpus"]))}
                start_ray(address, include_dashboard=False, log_to_driver=False, configure_logging=False, **cpus)
            if address or not self._started_ray:  # a cluster (or a Ray this process joined already): what it reports
                where = f"the Ray cluster at {address or 'this process'}"
                check_replicas_room(size, resources, cluster_resources(), where)
            self.timeline["ray_ready"] = time.time()
            for replica in range(0 if self._local is None else 1, size):  # the others load at once, each in its actor
                self._start(replica)
            # Replica 0 loaded (started again if it died loading); the others go on loading while the runner plans.
            described = self._call("describe")
        except BaseException:  # not enough room, a node that cannot read the model folder, a replica that keeps dying
            self.close()
            raise
        self.timeline["first_ready"] = time.time()
        self._identity, self.dtype = described["identity"], described["dtype"]
        self.capabilities, self.tokenizer = described["capabilities"], described["tokenizer"]
        self.num_parameters, self.attention_span = described["num_parameters"], described["attention_span"]
        # The wrapped engine's call size and prompt mixing, for the runner (running/stream.py call_size).
        self.requests_per_call, self.mixes_prompts = described["requests_per_call"], described["mixes_prompts"]
        self._merges_units = described["merges_units"]

    @classmethod
    def from_options(cls, options: BackendOptions) -> "ReplicaBackend":
        raise TypeError("ReplicaBackend is built by evalita_eval.replicas.create_backend")

    def _start(self, replica: int) -> None:
        """Start ``replica`` (again): its model loads; it takes units once its describe() is back (``_loaded``)."""
        self.loads += 1
        if self._in_process(replica):  # the driver checked its own paths
            self._replica0 = self._local.submit(partial(Replica, self.name, self._inner_options, self._threads, {}))
        else:
            import ray

            # The model folder the driver sees (a path, not a hub id): every replica must see it too.
            paths = {"model folder": self._inner_options.model} if os.path.exists(self._inner_options.model) else {}
            actor = ray.remote(Replica).options(max_restarts=0, **self._resources)
            self.actors[replica] = actor.remote(self.name, self._inner_options, self._threads, paths)
        self._described[replica] = self._submit(replica, "describe")
        self._loading[self._described[replica]] = replica

    def _submit(self, replica: int, method: str, *args: Any) -> Future:
        """``Replica.method(*args)`` on ``replica`` (a ``Shared`` argument as its list here, as its ref to an actor)."""
        if self._in_process(replica):
            args = tuple(a.values if isinstance(a, Shared) else a for a in args)
            return self._local.submit(lambda: getattr(self._replica0.result(), method)(*args))
        args = tuple(a.ref if isinstance(a, Shared) else a for a in args)
        return getattr(self.actors[replica], method).remote(*args).future()

    def _in_process(self, replica: int) -> bool:
        return replica == 0 and self._local is not None

    def _loaded(self, futures: Sequence[Future]) -> list[int]:
        """The replicas whose describe() among ``futures`` is back: loaded (one that died loading is started again)."""
        import ray

        done = []
        for future in futures:
            replica = self._loading.pop(future)
            try:
                problem = future.result()["problem"]
            except ray.exceptions.RayActorError:
                self._restart(replica)
                continue
            if problem:
                raise RuntimeError(problem)
            done.append(replica)
        return done

    def _restart(self, replica: int) -> None:
        self.restarts[replica] += 1
        if self.restarts[replica] > MAX_RESTARTS:
            raise RuntimeError(f"replica {replica} of backend {self.name!r} died {self.restarts[replica]} times; "
                               "the run stops")
        self._start(replica)

    def cache_identity(self) -> dict[str, Any]:
        return dict(self._identity)  # one replica's: replicas must not change a number

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return self._call("apply_chat_template", messages)

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
        values = list(requests)
        began, shared = time.time(), Shared(values, ray.put(values))
        whole = [list(c) for c in calls] if calls is not None else [list(range(len(requests)))]
        loaded = set(range(self.replicas)) - set(self._loading.values())
        while not loaded:  # every replica (re)starting: the first loaded plans
            loaded.update(self._loaded(list(wait(self._loading, return_when=FIRST_COMPLETED).done)))
        units = self._plan(kind, shared, whole, sorted(loaded))
        queues, planned = self._queues(units), time.time()
        out: list[Any] = [None] * len(requests)
        running: dict[Any, tuple[int, list[int]]] = {}  # future -> (replica, its units)
        busy, ends = [0.0] * self.replicas, [planned] * self.replicas

        def feed() -> None:
            """Each loaded replica a unit until it holds IN_FLIGHT: its share, else the largest shared (parallel.md)."""
            for depth in range(1, IN_FLIGHT + 1):
                for replica in sorted(loaded):
                    ahead = depth == 1 or queues[replica] or len(queues[-1]) > len(loaded)
                    held = sum(r == replica for r, _ in running.values())
                    if held < depth and (queues[replica] or queues[-1]) and ahead:
                        pack = (queues[replica] or queues[-1]).popleft()
                        merged = (tuple(i for u in pack for i in units[u].indices),)
                        one = units[pack[0]].calls if len(pack) == 1 else merged
                        running[self._submit(replica, "run_unit", kind, shared, one)] = (replica, pack)

        feed()
        while running or (self._loading and any(queues)):
            future = next(iter(wait([*running, *self._loading], return_when=FIRST_COMPLETED).done))
            if future in self._loading:  # a replica's model is loaded: it takes units
                loaded.update(self._loaded([future]))
                feed()
                continue
            replica, pack = running.pop(future)
            try:
                values, start, end = future.result()
            except ray.exceptions.RayActorError:
                # The replica died: its units without a result go back to the front of the queue, a new replica starts.
                lost = [pack] + [running.pop(f)[1] for f in [f for f, (r, _) in running.items() if r == replica]]
                queues[-1].extendleft(reversed(lost))
                loaded.discard(replica)
                self._restart(replica)
                feed()
                continue
            except ray.exceptions.RayTaskError as err:
                raise err.as_instanceof_cause() from None  # the backend's own error, as one replica raises it
            self.units_done[replica] += len(pack)
            busy[replica], ends[replica] = busy[replica] + end - start, max(ends[replica], end)
            feed()
            for i, value in zip((i for u in pack for i in units[u].indices), values):
                out[i] = value
                if on_result is not None:
                    on_result(i, value)
        self.timeline["calls"].append({"kind": kind, "units": len(units), "began": began, "planned": planned,
                                       "ended": time.time(), "busy": busy, "ends": ends})
        return out

    def _plan(self, kind: str, shared: Shared, whole: list[list[int]], loaded: list[int]) -> list[Unit]:
        """The units of the calls ``whole``, the ``loaded`` replicas each planning a share at once (call order kept);
        a replica that dies meanwhile leaves its share to the first one."""
        import ray

        k, n = len(loaded), self.replicas
        shares = [whole[i::k] for i in range(k)]
        futures = [self._submit(r, "plan_calls", kind, shared, share, n) for r, share in zip(loaded, shares)]
        planned = []
        for future, share in zip(futures, shares):
            try:
                planned.append(future.result())
            except ray.exceptions.RayActorError:
                planned.append(self._call("plan_calls", kind, shared, share, n))
        per_call = [planned[c % k][c // k] for c in range(len(whole))]  # call c is share c % k's (c // k)th
        return [u for units in per_call for u in units]

    def _queues(self, units: Sequence[Unit]) -> list[deque[list[int]]]:
        """Each replica's queue, then the shared one, of packs (unit lists) to run (docs/parallel.md#replicas): vllm's
        shares (``assign``) merged into calls; else every unit shared, largest first, for whichever replica is free."""
        if self._merges_units:  # a replica's units merged into calls of requests_per_call requests at most
            shares, sizes = assign([u.tokens for u in units], self.replicas), [len(u.indices) for u in units]
            calls = [token_budget_batches(s, sizes, sizes, lambda rows, width, n: n, self.requests_per_call or 1)
                     for s in shares]
            return [deque(packs) for packs in calls] + [deque()]
        order = sorted(range(len(units)), key=lambda u: (-units[u].tokens, u))
        return [deque() for _ in range(self.replicas)] + [deque([u] for u in order)]

    def _call(self, method: str, *args: Any) -> Any:
        """``Replica.method(*args)`` on replica 0, once loaded, started again if it died (up to MAX_RESTARTS times)."""
        import ray

        while True:
            if self._described[0] in self._loading:
                self._loaded([self._described[0]])
                continue
            try:
                return self._submit(0, method, *args).result()
            except ray.exceptions.RayActorError:
                self._restart(0)

    def close(self) -> None:
        """Every replica closed at once, then stopped; the Ray this run started shut down; the timeline logged."""
        import ray

        if self._local is None and not ray.is_initialized():
            return
        closing = time.time()
        # A dead or loading replica holds nothing: the loaded ones (their describe()) closed at once, then all stopped.
        described = {r: f.result() for r, f in enumerate(self._described)
                     if f is not None and f.done() and f.exception() is None}
        wait([self._submit(r, "close") for r in described])
        for actor in self.actors:
            if actor is not None:
                ray.kill(actor)
        if self._local is not None:
            self._local.stop()
        self.actors, self._described, self._local, stopped = [], [], None, time.time()
        if self._started_ray and ray.is_initialized():
            stop_ray()
        # The run's timeline, one JSON line at INFO (``evalita_eval.replicas.backend``; bench/replicas.py --time).
        loads = [d["loaded"] for d in described.values() if "loaded" in d]
        LOG.info("replica timeline: %s", json.dumps({**self.timeline, "loads": loads, "closing": closing,
                                                     "stopped": stopped, "closed": time.time()}))

"""The run's work as one stream (docs/evaluator.md): every request of the plan the resume cache lacks, computed before
any task is assembled, kind after kind, each saved as it arrives (``ResultSaver``); budget-forced prompts
(``TaskKind.forcing``) are computed when their task is assembled."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tqdm import tqdm

from ..api import method_of, request_payload
from .cache import ResultSaver, request_key
from .estimate import LL
from .plan import RunPlan

# Requests computed between two cache writes: small enough to lose little on a crash.
CHUNK_BATCHES = 4
# The batch size taken for the chunk size under --batch-size auto.
AUTO_BATCH = 64


def call_size(backend: Any, batch_size: int | None) -> int:
    """The requests a non-streaming backend gets per call: its ``requests_per_call``, else the run's batch x 4."""
    return backend.requests_per_call or max(1, (batch_size or AUTO_BATCH) * CHUNK_BATCHES)


@dataclass
class Segment:
    """One prompt of one task: the requests it sends that the run has to compute."""

    task: str
    requests: list[Any]  # pending, in the order sent
    keys: list[str]
    to_json: Callable[[Any], Any]


class RunStream:
    """Computes the plan's pending requests (``run``); ``keys`` and ``counts``: what the runner assembles and times
    each task with."""

    def __init__(self, runner: Any, plan: RunPlan) -> None:
        self.runner, self.plan = runner, plan
        self.keys: dict[tuple[str, str], list[str]] = {}  # (task, prompt) -> the key of each of its requests
        self.counts: Counter = Counter()  # requests, cached, computed, over the run and per task ("KEY:TASK")
        self.seconds: dict[str, float] = defaultdict(float)  # task -> backend seconds attributed to it
        self.tokens = plan.token_counter(runner.backend.tokenizer)  # the plan's: each text encoded once

    def run(self) -> None:
        kinds = dict.fromkeys(p.kind for e in self.plan.entries.values() if not e.asked.forcing for p in e.prompts)
        for kind in kinds:
            segments = self._segments(kind)
            total = sum(len(p.requests) for e in self.plan.entries.values() if not e.asked.forcing
                        for p in e.prompts if p.kind == kind)
            # One bar per request kind for the whole stream (off without a terminal or with --no-progress).
            with self._bar(total, "log-likelihoods" if kind == LL else "generations") as bar:
                bar.update(total - sum(len(s.requests) for s in segments))
                self._run_kind(kind, segments, bar)

    def cached(self, kind: str, task: str, requests: Sequence[Any], to_json: Callable[[Any], Any],
               label: str) -> tuple[list[Any], int]:
        """Values of ``requests`` (one prompt of ``task``, out of the stream: budget forcing) from the resume cache, the
        others computed as the stream computes one prompt, and written to it: (values, requests computed)."""
        keys = [request_key(self.runner.model.cache_key, kind, request_payload(r)) for r in requests]
        segment = self._segment(kind, task, requests, keys, to_json, set())
        with self._bar(len(requests), label) as bar:
            bar.update(len(requests) - len(segment.requests))
            self._run_kind(kind, [segment], bar)
        return [self.runner.cache[k] for k in keys], len(segment.requests)

    def _bar(self, total: int, label: str) -> tqdm:
        return tqdm(total=total, desc=label, unit="req", disable=not self.runner.config.progress, dynamic_ncols=True)

    def _segments(self, kind: str) -> list[Segment]:
        """The pending requests of every prompt of ``kind`` in the stream, prompt by prompt."""
        runner, out, seen = self.runner, [], set()
        for planned in (e for e in self.plan.entries.values() if not e.asked.forcing):
            to_json = lambda v, asked=planned.asked: asked.value_json(v, runner.backend.name)  # noqa: E731
            for prompt in (p for p in planned.prompts if p.kind == kind):
                keys = [request_key(runner.model.cache_key, kind, request_payload(r)) for r in prompt.requests]
                self.keys[(planned.name, prompt.name)] = keys
                out.append(self._segment(kind, planned.name, prompt.requests, keys, to_json, seen))
        return out

    def _segment(self, kind: str, task: str, requests: Sequence[Any], keys: list[str], to_json: Callable[[Any], Any],
                 seen: set[str]) -> Segment:
        """The requests the cache lacks, longest context first, each once (``seen``: the keys an earlier prompt of the
        stream sends); counts the requests and those read back."""
        hits = [k in seen or self.runner.cache.get(k, kind) is not None for k in keys]  # shape-checked once per request
        pending = sorted({k: i for i, (k, hit) in enumerate(zip(keys, hits)) if not hit}.values(),
                         key=lambda i: -len(requests[i].context))
        seen.update(keys)
        for name, n in (("requests", len(keys)), ("cached", sum(hits))):
            self.counts[name] += n
            self.counts[f"{name}:{task}"] += n
        return Segment(task, [requests[i] for i in pending], [keys[i] for i in pending], to_json)

    def _calls(self, segments: Sequence[Segment], streams: bool) -> list[list[int]]:
        """The backend calls (indices into the kind's pending requests): one group per segment, or one for all
        (``mixes_prompts``); whole to a streaming method, else in chunks of ``requests_per_call`` (or batch x 4)."""
        backend, groups, start = self.runner.backend, [], 0
        for s in segments:
            groups.append(list(range(start, start + len(s.requests))))
            start += len(s.requests)
        if backend.mixes_prompts:
            groups = [list(range(start))]
        if streams:
            return [g for g in groups if g]
        step = call_size(backend, self.runner.config.batch_size)
        return [g[i : i + step] for g in groups for i in range(0, len(g), step)]

    def _run_kind(self, kind: str, segments: list[Segment], bar: tqdm) -> None:
        self.runner._computing = kind  # what an interrupt had been computing (Runner.interrupt_summary)
        requests = [r for s in segments for r in s.requests]
        keys = [k for s in segments for k in s.keys]
        tasks = [s.task for s in segments for _ in s.requests]
        to_json = [s.to_json for s in segments for _ in s.requests]
        backend = self.runner.backend
        compute, streams = method_of(backend, kind), kind in backend.streams
        calls = self._calls(segments, streams)
        if backend.plans_calls:  # every call in one invocation: the replicas share them all
            chunks, inner = ([list(range(len(requests)))], [calls]) if requests else ([], [])
            run = lambda sent, saver, call: compute(sent, on_result=saver, calls=call)  # noqa: E731
        else:
            run = lambda sent, saver, call: compute(sent, on_result=saver) if streams else compute(sent)  # noqa: E731
            chunks, inner = calls, [None] * len(calls)
        for chunk, call in zip(chunks, inner):
            sent = [requests[i] for i in chunk]
            saver = ResultSaver(self.runner.cache, [keys[i] for i in chunk], sent, [to_json[i] for i in chunk], bar,
                                self.counts, kind, self.runner.timer, [tasks[i] for i in chunk])
            began = time.perf_counter()
            try:  # an interrupted call still counts its time: the resume adds to it
                values = run(sent, saver, call)
            finally:
                self._attribute(kind, sent, [tasks[i] for i in chunk], time.perf_counter() - began)
            if len(values) != len(chunk):
                raise RuntimeError(f"backend {self.runner.backend.name!r} returned {len(values)} results for "
                                   f"{len(chunk)} requests")
            saver.finish(values)

    def _attribute(self, kind: str, requests: Sequence[Any], tasks: Sequence[str], seconds: float) -> None:
        """A call's seconds, shared by its tasks in proportion to their prompt tokens."""
        weights: dict[str, int] = defaultdict(int)
        for request, task in zip(requests, tasks):
            texts = (request.context, request.continuation) if kind == LL else (request.context,)
            weights[task] += max(1, sum(self.tokens(x) for x in texts))
        whole = sum(weights.values())
        for task, weight in weights.items():
            self.seconds[task] += seconds * weight / whole

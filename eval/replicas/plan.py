"""How one backend call is cut into units for the replicas, and how units are spread (docs/parallel.md#replicas). A
unit's inner calls are exactly those one replica would receive or form itself, so every request lands in the same
batch, beside the same requests, as on one replica: the numbers are bitwise those of one replica."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..api import GenRequest, LLRequest, RequestKind
from ..backends.hf_batches import chunks
from ..running.stream import call_size


@dataclass(frozen=True)
class Unit:
    calls: tuple[tuple[int, ...], ...]  # inner calls, each request indices of the outer call
    tokens: int  # counted tokens: scored input (log-likelihood), context + new tokens (generation)

    @property
    def indices(self) -> list[int]:
        return [i for call in self.calls for i in call]


def merge_shared_contexts(calls: Sequence[Sequence[int]], contexts: Sequence[str]) -> list[list[list[int]]]:
    """``calls`` grouped so that calls holding requests of one context are in one group (union-find over contexts);
    groups in the order of their first call."""
    parent = list(range(len(calls)))

    def root(c: int) -> int:
        while parent[c] != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    owner: dict[str, int] = {}
    for c, call in enumerate(calls):
        for i in call:
            if contexts[i] in owner:
                a, b = root(owner[contexts[i]]), root(c)
                parent[max(a, b)] = min(a, b)
            else:
                owner[contexts[i]] = c
    groups: dict[int, list[list[int]]] = {}
    for c, call in enumerate(calls):
        groups.setdefault(root(c), []).append(list(call))
    return list(groups.values())


def plan_units(backend: Any, kind: str, requests: Sequence[LLRequest | GenRequest]) -> list[Unit]:
    """The units of one call of ``kind`` on ``backend`` (the wrapped backend, on a replica). Their tokens, counted with
    the backend's tokenizer (characters / 4 without one): a log-likelihood's context + continuation, a generation's
    context + its new-token limit."""
    tokenizer, ll = backend.tokenizer, kind == RequestKind.LOGLIKELIHOOD
    count = (lambda text: len(tokenizer.encode(text))) if tokenizer is not None else (lambda t: max(1, len(t) // 4))
    lengths = [count(r.context + r.continuation) if ll else count(r.context) + r.max_new_tokens  # type: ignore[union-attr]
               for r in requests]
    if kind in backend.streams:  # the call whole (hf generations): the batches the backend says it forms
        calls = backend.call_batches(kind, requests)
    else:  # the runner's chunks (running/stream.py), each one call, cut as the backend says
        size = backend.options.batch_size if backend.options is not None else getattr(backend, "batch_size", None)
        calls = [[chunk[i] for i in batch] for chunk in chunks(list(range(len(requests))), call_size(backend, size))
                 for batch in backend.call_batches(kind, [requests[i] for i in chunk])]
    return [Unit(tuple(tuple(c) for c in group), sum(lengths[i] for c in group for i in c))
            for group in merge_shared_contexts(calls, [r.context for r in requests])]


def assign(tokens: Sequence[int], replicas: int) -> list[list[int]]:
    """Unit indices per replica: largest first, each to the least loaded replica (ties: lowest index), so counted
    tokens, not request counts, are balanced. Each replica's list keeps the units' original order."""
    load = [0] * replicas
    shards: list[list[int]] = [[] for _ in range(replicas)]
    for u in sorted(range(len(tokens)), key=lambda u: (-tokens[u], u)):
        r = min(range(replicas), key=lambda r: (load[r], r))
        shards[r].append(u)
        load[r] += tokens[u]
    return [sorted(s) for s in shards]

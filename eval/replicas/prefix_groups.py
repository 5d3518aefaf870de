"""How a call of an engine with a prefix cache (``vllm``) is cut into units for the replicas: contexts never cut,
families (contexts sharing a first KV block) kept on one replica, a large family cut into few pieces
(docs/parallel.md#vllm-replicas), all by the token ids the engine receives (``engine_common``)."""

from __future__ import annotations

from typing import Any, Sequence

from ..api import GenRequest, LLRequest, RequestKind
from .plan import Unit, merge_shared_contexts

# The most a family's cut may recompute, as a fraction of its counted tokens.
CUT_COST = 0.01


def engine_tokens(backend: Any, kind: str, request: LLRequest | GenRequest) -> tuple[tuple[int, ...], ...] | None:
    """(context ids, prompt ids) the engine receives for ``request``; None when the backend refuses it (its own error
    then comes from the run, as with one replica)."""
    from ..backends.engine_common import generation_prompt, ll_windows

    try:
        if kind == RequestKind.LOGLIKELIHOOD:
            window = ll_windows(backend.tokenizer, [request], backend.max_length)[0]
            return window.context, window.ids
        prompt = tuple(generation_prompt(backend.tokenizer, request, backend.max_length))  # type: ignore[arg-type]
        return prompt, prompt
    except ValueError:
        return None


def shared_tokens(prompts: Sequence[Sequence[int]], block: int) -> int:
    """Tokens of the whole blocks every prompt of a family starts with (what its cache shares)."""
    first = prompts[0]
    common = min((next((k for k, (a, b) in enumerate(zip(first, p)) if a != b), min(len(first), len(p)))
                  for p in prompts), default=0)
    return common // block * block


def cut_family(family: Sequence[list[int]], tokens: Sequence[int], share: int, shared: int) -> list[list[int]]:
    """A family's contexts (index lists, in order) cut into consecutive pieces, each closed once it holds ``share``
    counted tokens; the share raised so that there are at most ``1 + CUT_COST x tokens / shared`` pieces."""
    total = sum(tokens[i] for context in family for i in context)
    if shared:
        most = 1 + int(CUT_COST * total / shared)
        share = max(share, -(-total // most))
    pieces: list[list[int]] = [[]]
    size = 0  # of the last piece
    for context in family:
        if size >= share:
            pieces.append([])
            size = 0
        pieces[-1] += context
        size += sum(tokens[i] for i in context)
    return pieces


def prefix_units(backend: Any, kind: str, requests: Sequence[LLRequest | GenRequest], replicas: int) -> list[Unit]:
    """The units of one call of ``kind`` on ``backend`` (a ``vllm`` backend, on a replica)."""
    block = backend.prefix_block_size()
    seen = [engine_tokens(backend, kind, r) for r in requests]
    # A refused request is a context of its own (keyed by its index: it shares nothing).
    contexts = [s[0] if s is not None else i for i, s in enumerate(seen)]
    firsts = [s[1][:block] if s is not None else i for i, s in enumerate(seen)]
    extra = [0 if kind == RequestKind.LOGLIKELIHOOD else r.max_new_tokens for r in requests]  # type: ignore[union-attr]
    tokens = [(len(s[1]) if s is not None else 1) + extra[i] for i, s in enumerate(seen)]
    by_context = [sum(group, []) for group in merge_shared_contexts([[i] for i in range(len(requests))], contexts)]  # type: ignore[arg-type]
    families = merge_shared_contexts(by_context, firsts)  # type: ignore[arg-type]
    share = -(-sum(tokens) // replicas)
    units = []
    for family in families:
        prompts = [seen[i][1] if seen[i] is not None else () for context in family for i in context]  # type: ignore[index]
        for piece in cut_family(family, tokens, share, shared_tokens(prompts, block)):
            units.append(Unit((tuple(piece),), sum(tokens[i] for i in piece)))
    return units

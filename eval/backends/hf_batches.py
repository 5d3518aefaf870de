"""How the ``hf`` backend cuts log-likelihood requests into forward passes (pure, no torch; bench/work.py counts the
model tokens with these same functions)."""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")


def scoring_groups(encoded: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[list[int]]:
    """lm-eval 0.4.13's one forward pass per context (``HFLM``, ``Collator(group_by="contexts")``): request indices
    grouped by ``context + continuation[:-1]`` tokens (the same model input), groups in order of first appearance, each
    group's first index the first of its longest continuations (whose pass scores it: ``Collator.get_batched``), the
    others in request order."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, (ctx, cont) in enumerate(encoded):
        groups.setdefault(tuple(ctx) + tuple(cont[:-1]), []).append(i)
    out = []
    for members in groups.values():
        lead = max(members, key=lambda i: len(encoded[i][1]))  # max keeps the first of equals
        out.append([lead] + [i for i in members if i != lead])
    return out


def longest_first(groups: Sequence[Sequence[int]], encoded: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[int]:
    """Group indices by decreasing length of their lead request's tokens (as lm-eval's Collator: the first pass is the
    widest); ties keep the groups' order."""
    return sorted(range(len(groups)), key=lambda g: -(len(encoded[groups[g][0]][0]) + len(encoded[groups[g][0]][1])))


def token_budget_batches(order: Sequence[int], lengths: Any, scored: Any, cost: Callable[[int, int, int], int],
                         budget: int) -> list[list[int]]:
    """``order`` cut, in order, into batches whose ``cost(rows, width, scored tokens)`` stays within ``budget`` bytes
    (width: the longest ``lengths[i]`` of the batch; scored: the sum of its ``scored[i]``; both indexed by the items
    of ``order``). An item that alone exceeds the budget is a batch of its own."""
    batches: list[list[int]] = []
    cur: list[int] = []
    width = n_scored = 0  # of cur
    for i in order:
        w, n = max(width, lengths[i]), n_scored + scored[i]
        if cur and cost(len(cur) + 1, w, n) > budget:
            batches.append(cur)
            cur, w, n = [], lengths[i], scored[i]
        cur.append(i)
        width, n_scored = w, n
    if cur:
        batches.append(cur)
    return batches


def chunks(items: list[T], size: int) -> list[list[T]]:
    """``items`` cut, in order, into runs of ``size`` (the last one shorter)."""
    return [items[s : s + size] for s in range(0, len(items), size)]

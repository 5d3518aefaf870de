"""How the ``hf`` backend cuts log-likelihood requests into forward passes (pure, no torch).

``scoring_groups`` is lm-eval 0.4.13's one-forward-per-context rule (``HFLM`` with its
``Collator(group_by="contexts")``): requests whose ``context + continuation[:-1]`` tokens are equal read exactly the
same model input, so one forward pass of the group's longest continuation scores them all (a one-token choice reads the
last position, a longer one the last ``len(continuation)`` positions). ``token_budget_batches`` cuts an order into
passes within a memory budget. bench/work.py counts the model tokens with these same functions.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence


def scoring_groups(encoded: Sequence[tuple[Sequence[int], Sequence[int]]]) -> list[list[int]]:
    """Request indices grouped by ``context + continuation[:-1]`` tokens, groups in order of first appearance, each
    group's first index the first of its longest continuations (the one whose forward pass scores the group, as
    lm-eval's ``Collator.get_batched``); the other indices follow in request order."""
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

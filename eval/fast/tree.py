"""Pack token sequences into prefix trees that fit a token budget.

Causal attention makes the hidden state of a token a function of its prefix alone, so
sequences that share a prefix can share its computation. Sorted lexicographically, each
sequence adds exactly ``len(seq) - lcp(seq, previous)`` new nodes to the trie of the
sequences before it; the nodes, in that order, form one packed row whose attention mask
lets each node see its ancestors only, and whose position ids are the node depths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np


@dataclass
class PackedTree:
    tokens: list[int] = field(default_factory=list)
    depth: list[int] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)  # -1 for a root
    # One entry per sequence: (caller's index, node index of every token of the sequence).
    paths: list[tuple[int, list[int]]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tokens)

    def ancestor_mask(self, width: int | None = None) -> np.ndarray:
        """Boolean (width, width) mask, True where node i may attend to node j (j is i or an ancestor).

        Padding nodes past the tree (up to ``width``) attend to themselves only, which keeps
        their attention finite; no real node attends to them.
        """
        n = len(self.tokens)
        width = n if width is None else width
        mask = np.zeros((width, width), dtype=bool)
        mask[np.arange(n, width), np.arange(n, width)] = True
        for i, p in enumerate(self.parent):
            if p >= 0:
                # Nodes come in depth-first order, so the parent's row is already complete.
                mask[i, : p + 1] = mask[p, : p + 1]
            mask[i, i] = True
        return mask


def _lcp(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def pack_trees(seqs: Sequence[Sequence[int]], max_tokens: int, slack: int = 64) -> list[PackedTree]:
    """Split ``seqs`` into prefix trees of about ``max_tokens`` nodes each.

    Attention over a packed tree costs the square of its size, so trees stay small; but
    a tree may grow to ``slack`` nodes past its longest sequence, so that the choices of
    an item with a context longer than ``max_tokens`` still share that context. Every
    index of ``seqs`` appears in exactly one tree's ``paths``.
    """
    order = sorted(range(len(seqs)), key=lambda i: seqs[i])
    trees: list[PackedTree] = []
    tree = PackedTree()
    prev: Sequence[int] = ()
    prev_path: list[int] = []
    longest = 0
    for i in order:
        seq = seqs[i]
        shared = _lcp(prev, seq)
        size = len(tree) + len(seq) - shared
        if len(tree) and size > max(max_tokens, max(longest, len(seq)) + slack):
            trees.append(tree)
            tree, shared, prev_path, longest = PackedTree(), 0, [], 0
        longest = max(longest, len(seq))
        path = prev_path[:shared]
        for pos in range(shared, len(seq)):
            tree.parent.append(path[-1] if path else -1)
            path.append(len(tree.tokens))
            tree.tokens.append(seq[pos])
            tree.depth.append(pos)
        tree.paths.append((i, path))
        prev, prev_path = seq, path
    if len(tree) or tree.paths:
        trees.append(tree)
    return trees


def batch_trees(trees: list[PackedTree], max_tokens: int) -> list[list[PackedTree]]:
    """Group trees into forward passes of at most ``max_tokens`` padded tokens (rows x longest row)."""
    batches: list[list[PackedTree]] = []
    cur: list[PackedTree] = []
    for tree in sorted(trees, key=len, reverse=True):  # longest first: the first row sets the width
        if cur and len(cur[0]) * (len(cur) + 1) > max_tokens:
            batches.append(cur)
            cur = []
        cur.append(tree)
    if cur:
        batches.append(cur)
    return batches

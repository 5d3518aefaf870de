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

    def ancestor_mask(self) -> np.ndarray:
        """Boolean (n, n) mask, True where node i may attend to node j (j is i or an ancestor)."""
        n = len(self.tokens)
        mask = np.zeros((n, n), dtype=bool)
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


def pack_trees(seqs: Sequence[Sequence[int]], max_tokens: int) -> list[PackedTree]:
    """Split ``seqs`` into prefix trees of at most ``max_tokens`` nodes each.

    A sequence longer than ``max_tokens`` gets a tree of its own. Every index of ``seqs``
    appears in exactly one tree's ``paths``.
    """
    order = sorted(range(len(seqs)), key=lambda i: seqs[i])
    trees: list[PackedTree] = []
    tree = PackedTree()
    prev: Sequence[int] = ()
    prev_path: list[int] = []
    for i in order:
        seq = seqs[i]
        shared = _lcp(prev, seq)
        if len(tree) and len(tree) + len(seq) - shared > max_tokens:
            trees.append(tree)
            tree, shared, prev_path = PackedTree(), 0, []
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

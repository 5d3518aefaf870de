"""Prefix-tree packing: node counts, paths and the ancestor mask on hand-made sequences."""

import numpy as np

from evalita_eval.fast.tree import batch_trees, pack_trees


def test_shared_prefixes_become_one_node_each():
    seqs = [[1, 2, 3], [1, 2, 4], [1, 2], [5], [1, 2, 3]]
    (tree,) = pack_trees(seqs, max_tokens=100)
    # Trie: 1-2-{3,4}, 5 -> five nodes, whatever the order of the sequences.
    assert len(tree) == 5
    paths = dict(tree.paths)
    assert sorted(paths) == [0, 1, 2, 3, 4]
    for i, seq in enumerate(seqs):
        assert [tree.tokens[n] for n in paths[i]] == seq
        assert [tree.depth[n] for n in paths[i]] == list(range(len(seq)))
    assert paths[0] == paths[4]  # duplicates share every node
    assert paths[2] == paths[0][:2]


def test_ancestor_mask_lets_a_node_see_its_path_only():
    (tree,) = pack_trees([[1, 2, 3], [1, 4]], max_tokens=100)
    # Depth-first order: 1, 2, 3, 4 with 4 a child of 1.
    assert tree.tokens == [1, 2, 3, 4]
    assert tree.parent == [-1, 0, 1, 0]
    expected = np.array(
        [
            [1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0],
            [1, 1, 1, 0, 0],
            [1, 0, 0, 1, 0],
            [0, 0, 0, 0, 1],  # padding attends to itself only
        ],
        dtype=bool,
    )
    assert (tree.ancestor_mask(5) == expected).all()


def test_budget_splits_trees_and_restarts_sharing():
    seqs = [[7, i, j] for i in range(4) for j in range(3)]
    trees = pack_trees(seqs, max_tokens=6, slack=0)
    assert all(len(t) <= 6 for t in trees)
    assert sorted(i for t in trees for i, _ in t.paths) == list(range(len(seqs)))
    # Each tree starts again from the shared root token.
    assert all(t.tokens[0] == 7 for t in trees)


def test_long_context_keeps_its_choices_in_one_tree():
    ctx = list(range(100, 140))
    seqs = [ctx + [c] for c in (1, 2, 3, 4)]
    (tree,) = pack_trees(seqs, max_tokens=16, slack=8)
    assert len(tree) == 44


def test_batches_respect_the_padded_token_budget():
    trees = pack_trees([[i, i + 1, i + 2] for i in range(0, 60, 3)], max_tokens=6, slack=0)
    batches = batch_trees(trees, max_tokens=13)
    assert sum(len(b) for b in batches) == len(trees)
    assert all(len(b[0]) * len(b) <= 13 for b in batches)
    assert all(len(b[0]) == max(len(t) for t in b) for b in batches)

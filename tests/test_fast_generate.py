"""Continuous batching: who joins a batch, and refilled batches give plain greedy text."""

from __future__ import annotations

import random
from collections import deque

from fast_helpers import tiny_lm  # noqa: F401  (tiny_lm is a fixture)

from evalita_eval.api import GenRequest
from evalita_eval.fast import FastBackend
from evalita_eval.fast import generate as gen
from evalita_eval.fast.reference import plain_generate_until


def test_admissible_fills_up_to_the_budget_and_never_starves():
    need = [30, 20, 20, 10, 100]
    waiting = deque([0, 1, 2, 3])
    # Empty batch: 0 (30), 1 (2 x 30 = 60), 2 (3 x 30 = 90) fit in 100; 3 would make 4 x 30.
    assert gen._admissible(waiting, [], need, 100) == [0, 1, 2] and list(waiting) == [3]
    # Live rows 0 and 1 (width 30): a third row makes 90 <= 100.
    assert gen._admissible(deque([3]), [0, 1], need, 100) == [3]
    assert gen._admissible(deque([3]), [0, 1, 2], need, 100) == []
    # A request wider than the budget still runs, alone.
    assert gen._admissible(deque([4, 3]), [], need, 50) == [4]


def test_refilled_rows_give_plain_greedy_text(request, monkeypatch):
    model, tok = request.getfixturevalue("tiny_lm")
    rng = random.Random(3)
    words = "la frase implica che il contatore dell'acqua domanda risposta è così perché non".split()
    reqs = [
        GenRequest(" ".join(rng.choice(words) for _ in range(rng.randint(1, 30))), tuple(rng.sample(["\n", ",", "e", "a"], rng.randint(0, 2))), rng.randint(1, 12))
        for _ in range(20)
    ]
    joins = []
    original = gen._Rows._join

    def counting(self, new, *args):
        joins.append(len(new))
        return original(self, new, *args)

    monkeypatch.setattr(gen._Rows, "_join", counting)
    got = FastBackend(model, tok, 48, max_batch_tokens=120).generate_until(reqs)
    assert got == plain_generate_until(model, tok, reqs, 48)
    assert joins, "no request joined a live batch"

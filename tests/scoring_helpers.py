"""Shared fixtures of the scoring tests: the tiny model, built once per session, and mixed requests."""

from __future__ import annotations

import random

import pytest
import torch

from evalita_eval.api import LLRequest


def within_bound(got: float, ref: float) -> bool:
    """The issue's tolerance for float32: 1e-6 * |LL| + 1e-5."""
    return abs(got - ref) <= 1e-6 * abs(ref) + 1e-5


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory):
    """(model, tokenizer) of a 2-layer, 64-wide Llama with seeded random weights (CPU, float32).

    Its tokenizer adds BOS like Llama's, so the scoring paths are checked against the
    reference's special-token rule too.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tiny_model import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, seed=0, kv_heads=2)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(path)


WORDS = "la frase implica che il contatore dell'acqua domanda risposta è così perché non Sì No A B".split()


def random_text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def mixed_requests(rng: random.Random, model, tok) -> list[LLRequest]:
    """Requests that share stems, some long (left-truncated at 48 tokens), some greedy, one duplicate."""
    reqs = []
    stems = [random_text(rng, 1, 12) for _ in range(4)]
    for _ in range(25):
        # Contexts share stems (as prompts p1/p3 and few-shot examples do); some are long
        # enough to be left-truncated at MAX_LENGTH; some end in whitespace.
        ctx = rng.choice(stems) + " " + random_text(rng, 0, rng.choice([3, 30, 60]))
        ctx += rng.choice(["", " ", "\n"])
        for cont in rng.sample(["Sì", "No", "A", "la risposta è così", "B perché non"], 3):
            reqs.append(LLRequest(ctx, " " + cont))
    reqs.append(LLRequest("", "la frase"))  # empty context: the prefix token stands in
    reqs.append(reqs[0])  # a duplicate
    # Continuations that are the model's own greedy token, so that is_greedy is True somewhere.
    with torch.inference_mode():
        for stem in stems:
            ids = tok.encode(stem)
            nxt = int(model(torch.tensor([ids])).logits[0, -1].argmax())
            reqs.append(LLRequest(stem, tok.decode([nxt])))
    return reqs

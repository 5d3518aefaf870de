"""Shared fixtures for the fast-backend tests: the tiny model, built once per session."""

from __future__ import annotations

import pytest


def within_bound(got: float, ref: float) -> bool:
    """The issue's tolerance for float32: 1e-6 * |LL| + 1e-5."""
    return abs(got - ref) <= 1e-6 * abs(ref) + 1e-5


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory):
    """(model, tokenizer) of a 2-layer, 64-wide Llama with seeded random weights (CPU, float32).

    Its tokenizer adds BOS like Llama's, so the fast path is checked against the
    reference's special-token rule too.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evalita_eval.tiny import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, seed=0, kv_heads=2)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(path)

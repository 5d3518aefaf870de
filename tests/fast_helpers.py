"""Shared fixtures for the fast-backend tests: the bench's tiny model, built once per session."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def bench_module(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def within_bound(got: float, ref: float) -> bool:
    """The issue's tolerance for float32: 1e-6 * |LL| + 1e-5."""
    return abs(got - ref) <= 1e-6 * abs(ref) + 1e-5


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory):
    """(model, tokenizer) of a 2-layer, 64-wide Llama with seeded random weights (CPU, float32)."""
    tiny = bench_module("tiny")
    path = tiny.build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, seed=0, vocab_size=1024, corpus_lines=2000)
    return tiny.load(path)

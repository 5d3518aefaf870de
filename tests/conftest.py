"""Shared fixtures: the committed raw samples, copies of them to break, and the tiny model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SAMPLES = DATA / "raw"


@pytest.fixture
def samples_raw() -> Path:
    """The committed excerpts of the original files (read-only use)."""
    return SAMPLES


@pytest.fixture
def raw_copy(tmp_path: Path):
    """Copy the samples of some tasks into a temporary raw folder that a test may modify."""

    def make(*tasks: str) -> Path:
        root = tmp_path / "raw"
        for task in tasks:
            shutil.copytree(SAMPLES / task, root / task)
        root.mkdir(exist_ok=True)
        return root

    return make


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, hidden-64 random Llama with a BPE tokenizer trained on Italian, saved locally."""
    pytest.importorskip("torch")
    from evalita_eval.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, hidden-64 random Llama with a BPE tokenizer trained on Italian, saved locally."""
    pytest.importorskip("torch")
    from evalita_eval.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))

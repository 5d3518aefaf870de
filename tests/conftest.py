"""Shared fixtures: the committed raw samples, copies of them to break, and the tiny model."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from paths import TEST_DATA

# Tests never read or write the user's caches (~/.cache/huggingface...): every cache the
# libraries know of points into one temporary folder for the whole session. Set here, at
# import of the conftest, before any test module imports datasets or huggingface_hub
# (they read these variables once, at import).
_CACHE_ROOT = Path(tempfile.mkdtemp(prefix="evalita-test-cache-"))
CACHE_VARIABLES = {
    "HF_HOME": "hf",
    "HF_DATASETS_CACHE": "hf/datasets",
    "HF_HUB_CACHE": "hf/hub",
    "HUGGINGFACE_HUB_CACHE": "hf/hub",
    "TRANSFORMERS_CACHE": "hf/transformers",
    "HF_MODULES_CACHE": "hf/modules",
    "XDG_CACHE_HOME": "xdg",
    "TORCH_HOME": "torch",
    "MPLCONFIGDIR": "matplotlib",
}
for _name, _sub in CACHE_VARIABLES.items():
    os.environ[_name] = str(_CACHE_ROOT / _sub)
# The Hub is never reached from tests except the loopback stub, which sets HF_ENDPOINT itself.
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(_CACHE_ROOT, ignore_errors=True)

DATA = TEST_DATA
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

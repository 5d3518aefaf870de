"""Shared fixtures: the committed raw samples, copies of them to break, and the tiny model."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from paths import TEST_DATA

# Tests never see the user's Hub, offline or token settings (HF_HUB_OFFLINE=1 on an HPC login
# node, HF_ENDPOINT of a mirror, HF_TOKEN, TRANSFORMERS_OFFLINE...): every variable of these
# families is dropped here, at import of the conftest, before any test module imports datasets,
# huggingface_hub or transformers (they read them once, at import); a test that depends on one
# sets it itself (monkeypatch, or the env of its subprocess).
HUB_VARIABLE_PREFIXES = ("HF_", "HUGGINGFACE_", "HUGGING_FACE_", "TRANSFORMERS_")
USER_HUB_VARIABLES = sorted(name for name in os.environ if name.startswith(HUB_VARIABLE_PREFIXES))
for _name in USER_HUB_VARIABLES:
    del os.environ[_name]
os.environ.pop("EVALITA_SWEEP_FOLDER_FILE", None)  # a sweep's, for the run it starts (eval/sweep.py)

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


@pytest.fixture(autouse=True)
def _hub_online_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub and datasets keep offline mode in module constants read at their import:
    if something imported them before this conftest cleared the environment, those constants
    still hold the user's HF_HUB_OFFLINE. Every test starts from the cleared values."""
    hub_constants = sys.modules.get("huggingface_hub.constants")
    if hub_constants is not None:
        monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    datasets_config = sys.modules.get("datasets.config")
    if datasets_config is not None:
        monkeypatch.setattr(datasets_config, "HF_HUB_OFFLINE", False)
        if hasattr(datasets_config, "HF_DATASETS_OFFLINE"):
            monkeypatch.setattr(datasets_config, "HF_DATASETS_OFFLINE", False)


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
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))

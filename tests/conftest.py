"""Shared fixtures: the committed raw samples and copies of them to break."""

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

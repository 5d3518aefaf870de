"""The real-model tier: SmolLM2-135M-Instruct (a real pretrained instruct model, Llama
architecture, 49,152-token vocabulary, chat template) as a plain float32 folder and as the
Q4_1 GGUF file it ships as (scripts/real_model.py fetches and converts it).

``EVALITA_REAL_MODEL_DIR`` names the folder that ``scripts/real_model.py convert --dir DIR``
filled (DIR/plain and DIR/SmolLM2-135M-Instruct.Q4_1.gguf). Without it these tests skip with the
reason; ``.ci/run`` sets it and ``EVALITA_REQUIRE_REAL_MODEL=1``, which turns the skip into a
failure. The tests never use the network.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_DIR = os.environ.get("EVALITA_REAL_MODEL_DIR")
REAL_DIR = Path(_DIR) if _DIR else None
HAVE_REAL = REAL_DIR is not None and (REAL_DIR / "plain" / ".complete").is_file() and (REAL_DIR / GGUF_NAME).is_file()
if not HAVE_REAL and os.environ.get("EVALITA_REQUIRE_REAL_MODEL") == "1":
    raise RuntimeError(f"EVALITA_REQUIRE_REAL_MODEL=1 but EVALITA_REAL_MODEL_DIR={_DIR!r} holds no converted model "
                       "(python scripts/real_model.py convert --dir DIR): the real-model tests would be skipped")

SKIP_REASON = "no real model: set EVALITA_REAL_MODEL_DIR to a folder filled by scripts/real_model.py convert --dir DIR (.ci/run does)"


@pytest.fixture(scope="session")
def real_plain() -> Path:
    if not HAVE_REAL:
        pytest.skip(SKIP_REASON)
    return REAL_DIR / "plain"  # type: ignore[operator]


@pytest.fixture(scope="session")
def real_gguf() -> Path:
    if not HAVE_REAL:
        pytest.skip(SKIP_REASON)
    return REAL_DIR / GGUF_NAME  # type: ignore[operator]


@pytest.fixture(scope="session")
def real_loaded(real_plain: Path) -> Any:
    """The plain folder loaded once (float32, CPU); the hf backends of the tests share it."""
    from evalita_eval.api import BackendOptions
    from evalita_eval.backends.hf import load_hf

    return load_hf(BackendOptions(model=str(real_plain), dtype="float32"))

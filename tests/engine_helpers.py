"""Shared material of the engine tests (vLLM in-process, vLLM's OpenAI server on 127.0.0.1).

These tests need vLLM (``pip install '.[vllm]'``, see docs/engines.md): the README's
test command skips them when it is absent; ``.ci/run`` runs them in ``.venv-vllm``
with ``EVALITA_REQUIRE_VLLM=1``, which turns the skip into a failure.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

HERE = Path(__file__).parent
DATA = HERE / "data" / "build"
HAVE_VLLM = importlib.util.find_spec("vllm") is not None
if not HAVE_VLLM and os.environ.get("EVALITA_REQUIRE_VLLM") == "1":
    raise RuntimeError("EVALITA_REQUIRE_VLLM=1 but vLLM is not importable: the engine tests would be skipped")
requires_vllm = pytest.mark.skipif(not HAVE_VLLM, reason="vLLM is not installed (pip install '.[vllm]'); .ci/run runs these in .venv-vllm")

# vLLM on this CPU: a small KV cache (GiB), no Hub, one process, and no writes to ~/.cache.
_SCRATCH = Path(tempfile.mkdtemp(prefix="evalita-engines-"))
ENGINE_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CACHE_ROOT": str(_SCRATCH / "vllm-cache"),
    "VLLM_CONFIG_ROOT": str(_SCRATCH / "vllm-config"),
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}
if HAVE_VLLM:
    os.environ.update(ENGINE_ENV)

# The tolerance of every engine-vs-HF comparison (float32).
def ll_close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * abs(a) + 1e-5


@pytest.fixture(scope="session")
def tiny32(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama with 2 heads of size 32 (vLLM's CPU attention needs a head size >= 32)."""
    from evalita_eval.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny32"), heads=2)


@pytest.fixture(scope="session")
def hf32(tiny32: Path) -> Any:
    """The plain HF reference on the same model, float32."""
    from evalita_eval.backend_hf import HFBackend

    return HFBackend(str(tiny32), dtype="float32")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


API_KEY = "sk-evalita-test-7d1c0e9f"  # what the test server demands; must never show up anywhere


@pytest.fixture(scope="session")
def vllm_server(tiny32: Path) -> Iterator[str]:
    """vLLM's OpenAI-compatible server on 127.0.0.1 (with an API key), stopped by its pid; yields the base URL."""
    port = free_port()
    log = open(_SCRATCH / f"server-{port}.log", "w")
    env = dict(os.environ, **ENGINE_ENV)
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny32), "--host", "127.0.0.1",
           "--port", str(port), "--dtype", "float32", "--enforce-eager", "--api-key", API_KEY]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:  # until the server answers, or dies
            if proc.poll() is not None:
                raise RuntimeError(f"the vLLM server exited with {proc.returncode}:\n" + Path(log.name).read_text()[-4000:])
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        yield f"{url}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def run_in_process(backend: Any, backend_name: str, model: Path, out: Path, **config: Any) -> dict:
    """The Runner over every task and prompt of the test build; returns results.json."""
    from evalita_eval.runner import ModelInfo, RunConfig, Runner
    from evalita_eval.tasks import DataSource, all_entries

    runner = Runner(backend, ModelInfo(str(model), None, backend.dtype, backend_name), DataSource(data_dir=str(DATA)),
                    RunConfig(progress=False, **config), out, echo=lambda s: None)
    runner.run(all_entries())
    return json.loads((out / "results.json").read_text("utf-8"))


def assert_same_run(ref_dir: Path, got_dir: Path) -> int:
    """Same scores, predictions and generations; log-likelihoods within tolerance. Returns the LLs compared."""
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
                assert ll_close(u, v), (name, u, v)
                n += 1
    return n

"""Fixtures of the engine tests: the head-size-32 tiny model, its HF reference, vLLM's OpenAI server
(one engine, and two engines behind one server: ``--data-parallel-size 2``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from .engine_helpers import API_KEY, ENGINE_ENV, SCRATCH, free_port


@pytest.fixture(scope="session")
def tiny32(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama with 2 heads of size 32 (vLLM's CPU attention needs a head size >= 32)."""
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny32"), heads=2)


@pytest.fixture(scope="session")
def hf32(tiny32: Path) -> Any:
    """The plain HF reference on the same model, float32."""
    from evalita_eval.api import BackendOptions
    from evalita_eval.backends import create_backend

    return create_backend("hf", BackendOptions(model=str(tiny32), dtype="float32"))


@contextmanager
def served(model: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """vLLM's OpenAI-compatible server on 127.0.0.1 (with an API key) with ``args``, stopped by its pid; yields its root URL."""
    port = free_port()
    log = open(SCRATCH / f"server-{port}.log", "w")
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--dtype", "float32", "--enforce-eager", "--api-key", API_KEY, *args]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **ENGINE_ENV, **(env or {})})
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
        yield url
    finally:
        proc.terminate()  # the server stops the engine processes it started (a data-parallel server's too)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def vllm_server(tiny32: Path) -> Iterator[str]:
    """One vLLM engine behind the server; yields the base URL (``.../v1``)."""
    with served(tiny32) as url:
        yield f"{url}/v1"


@pytest.fixture(scope="session")
def vllm_dp_server(tiny32: Path) -> Iterator[str]:
    """``vllm serve --data-parallel-size 2``: two engines behind one server (vLLM balances the
    requests over them); its processes talk over loopback only (VLLM_HOST_IP). Yields the base URL."""
    with served(tiny32, "--data-parallel-size", "2", env={"VLLM_HOST_IP": "127.0.0.1"}) as url:
        yield f"{url}/v1"

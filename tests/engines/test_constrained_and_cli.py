"""Constrained decoding through the engines (vLLM's structured outputs, in-process and over
its server) against the hf backend's xgrammar processor; and ``evalita-eval run`` through
the CLI with the engine backends (issue 13's done-when)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .engine_helpers import API_KEY, DATA, assert_same_run, requires_vllm, run_in_process
from evalita_data.registry import TASKS
from evalita_eval.api import BackendOptions
from evalita_eval.backends import create_backend

pytestmark = requires_vllm

MC_TASKS = sorted(t for t, s in TASKS.items() if s.output_type == "multiple_choice")
KEY_ENV = "EVALITA_TEST_OPENAI_KEY"
ENGINE_ARGS = {"enforce_eager": True}


def _all_parsed(out: Path, limit: int) -> int:
    """Every prompt of every MC task answered with a parsable choice; returns the samples checked."""
    doc = json.loads((out / "results.json").read_text("utf-8"))
    assert doc["config"]["constrained"] is True
    checked = 0
    for task in MC_TASKS:
        assert sorted(doc["results"][task]) == ["p1", "p2"], task
        for prompt, scores in doc["results"][task].items():
            samples = [json.loads(x) for x in (out / "samples" / f"{task}_{prompt}.jsonl").read_text("utf-8").splitlines()]
            assert scores["unparsed"] == 0 and scores["n"] == len(samples) == min(limit, _eval_docs(task)), (task, prompt, scores)
            assert all(s["generation"] == s["choices"][s["parsed"]] for s in samples), (task, prompt)
            checked += len(samples)
    return checked


def _eval_docs(task: str) -> int:
    spec = TASKS[task]
    return sum(1 for _ in (DATA / task / f"{spec.eval_split}.jsonl").open(encoding="utf-8"))


@pytest.fixture(scope="module")
def engine(tiny32: Path):
    backend = create_backend("vllm", BackendOptions(model=str(tiny32), dtype="float32", extra={"vllm_engine_args": ENGINE_ARGS}))
    yield backend
    backend.close()


@pytest.mark.parametrize("setting", ["ce", "ce-ni"])
def test_vllm_constrained_equals_hf(engine, hf32, tiny32: Path, tmp_path: Path, setting: str) -> None:
    """vLLM's structured outputs and the hf backend's processor (both xgrammar 0.2.8), float32 greedy:
    every answer parses, and the generations and scores are identical."""
    assert engine.capabilities.constrained
    config = {"limit": 4, "setting": setting, "constrained": True, "tasks": MC_TASKS}
    run_in_process(hf32, "hf", tiny32, tmp_path / "hf", **config)
    run_in_process(engine, "vllm", tiny32, tmp_path / "vllm", **config)
    assert _all_parsed(tmp_path / "vllm", 4) == _all_parsed(tmp_path / "hf", 4) == 2 * sum(min(4, _eval_docs(t)) for t in MC_TASKS)
    assert_same_run(tmp_path / "hf", tmp_path / "vllm")


def test_openai_chat_constrained_equals_hf(hf32, tiny32: Path, vllm_server: str, tmp_path: Path, monkeypatch) -> None:
    """openai-chat sends the turns (system instruction, one multi-turn example) and vLLM's
    ``structured_outputs``; the server's template and grammar give hf's constrained answers."""
    monkeypatch.setenv(KEY_ENV, API_KEY)
    backend = create_backend("openai-chat", BackendOptions(model=str(tiny32), extra={"base_url": vllm_server, "api_key_env": KEY_ENV}))
    assert backend.capabilities.constrained
    config = {"limit": 3, "setting": "ce", "constrained": True, "tasks": MC_TASKS, "apply_chat_template": True,
              "num_fewshot": 1, "system_instruction": "Rispondi con la lettera."}
    run_in_process(hf32, "hf", tiny32, tmp_path / "hf", **config)
    run_in_process(backend, "openai-chat", tiny32, tmp_path / "chat", **config)
    backend.close()
    assert _all_parsed(tmp_path / "chat", 3) == 2 * sum(min(3, _eval_docs(t)) for t in MC_TASKS)
    sample = json.loads((tmp_path / "chat" / "samples" / f"{MC_TASKS[0]}_p1.jsonl").read_text("utf-8").splitlines()[0])
    # system, example (user, assistant), question
    assert sample["prompt"].startswith("<|system|>\nRispondi con la lettera.\n<|user|>\n") and sample["prompt"].count("<|assistant|>\n") == 1
    assert_same_run(tmp_path / "hf", tmp_path / "chat")


def test_openai_constrained_refused_by_server_is_clear(tiny32: Path, vllm_server: str, monkeypatch) -> None:
    """A constraint the server rejects (an invalid regex here) names the field and what --constrained needs."""
    from evalita_eval.api import Constraint, GenRequest
    from evalita_eval.backends.openai import ServerError

    monkeypatch.setenv(KEY_ENV, API_KEY)
    backend = create_backend("openai-completions", BackendOptions(model=str(tiny32), extra={"base_url": vllm_server, "api_key_env": KEY_ENV, "max_retries": 0}))
    with pytest.raises(ServerError, match="structured_outputs.*cannot run --constrained"):
        backend.generate_until([GenRequest("x", (), 2, Constraint("regex", pattern="(unclosed"))])
    backend.close()


# ------------------------------------------------------------------ the CLI, in subprocesses


def _cli_run(out: Path, *args: str, env: dict | None = None) -> dict:
    exe = Path(sys.executable).parent / "evalita-eval"
    cmd = [str(exe), "run", "--model", args[0], "--data", str(DATA), "--limit", "10", "--max-new-tokens", "24",
           "--dtype", "float32", "--no-progress", "--output-dir", str(out), *args[1:]]
    done = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((out / "results.json").read_text("utf-8"))


@pytest.fixture(scope="module")
def hf_cli_run(tiny32: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("cli") / "hf"
    return out, _cli_run(out, str(tiny32), "--backend", "hf")


def test_cli_vllm_same_scores_as_hf(tiny32: Path, hf_cli_run, tmp_path: Path) -> None:
    """`evalita-eval run --backend vllm --limit 10`: the same results.json scores as --backend hf, every task and prompt."""
    hf_dir, ref = hf_cli_run
    got = _cli_run(tmp_path / "vllm", str(tiny32), "--backend", "vllm", "--backend-arg", "vllm_engine_args=" + json.dumps(ENGINE_ARGS))
    assert got["status"] == ref["status"] == "complete"
    assert got["model"]["backend"] == "vllm" and sorted(got["results"]) == sorted(ref["results"]) and len(ref["results"]) >= 10
    assert_same_run(hf_dir, tmp_path / "vllm")


def test_cli_openai_completions_same_scores_as_hf(tiny32: Path, hf_cli_run, vllm_server: str, tmp_path: Path) -> None:
    hf_dir, ref = hf_cli_run
    got = _cli_run(tmp_path / "api", str(tiny32), "--backend", "openai-completions", "--backend-arg", f"base_url={vllm_server}",
                   "--backend-arg", f"api_key_env={KEY_ENV}", env={KEY_ENV: API_KEY})
    assert got["model"]["backend"] == "openai-completions" and got["status"] == "complete"
    assert_same_run(hf_dir, tmp_path / "api")

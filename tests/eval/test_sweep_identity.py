"""One typed run config (eval/run_config.py) behind `run --config FILE` and each run of a sweep file, and
sweeps that know their runs by identity (eval/sweep_runs.py), through the real CLI: `run --config` and a
sweep run of the same keys are one run (one run id, one folder); a sweep edited and rerun computes the
changed run in its own folder, a renamed run is still complete; options given on the command line override
the file; replicas or a sweep's reservations beyond the machine are one line before anything starts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from paths import TEST_DATA

pytest.importorskip("ray")
DATA = TEST_DATA / "build"


@pytest.fixture(autouse=True)
def ray_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Ray's sessions in a folder of the test's own (short: Ray's socket paths must stay short)."""
    folder = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
    monkeypatch.setenv("RAY_TMPDIR", str(folder / "ray"))  # read by the processes _cli starts
    yield folder / "ray"
    shutil.rmtree(folder, ignore_errors=True)


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(cwd / "home")}  # Ray saves its login token under the home folder
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", *args], cwd=cwd, capture_output=True, text=True, env=env)


def _keys(model: Path, limit: int) -> dict:
    return {"model": str(model), "data": str(DATA), "tasks": "wic", "prompts": ["p1"], "limit": limit, "batch_size": 2,
            "backend_args": {"gguf_file": "none"}}


def _sweep(cwd: Path, runs: list[dict]) -> subprocess.CompletedProcess:
    (cwd / "sweep.json").write_text(json.dumps({"runs": runs}), "utf-8")
    return _cli(cwd, "sweep", "sweep.json", "--out", "report")


def _folder(said: str, prefix: str) -> Path:
    """The folder named on the line that starts with ``prefix`` (``writing to X``, ``... in X``)."""
    (line,) = [line for line in said.splitlines() if line.startswith(prefix)]
    return Path(line.rsplit(" ", 1)[1].rstrip(")"))


def test_run_config_and_a_sweep_run_are_one_run_and_an_edited_sweep_computes_the_change(tiny_model: Path, tmp_path: Path) -> None:
    alone, swept = tmp_path / "alone", tmp_path / "swept"
    alone.mkdir(), swept.mkdir()
    (alone / "run.yaml").write_text(json.dumps(_keys(tiny_model, 1)), "utf-8")
    ran = _cli(alone, "run", "--config", "run.yaml", "--no-progress")
    assert ran.returncode == 0, ran.stderr[-2000:]
    folder = _folder(ran.stderr, "writing to ")
    first = _sweep(swept, [{"name": "one", **_keys(tiny_model, 1)}])
    assert first.returncode == 0, first.stdout + first.stderr
    swept_folder = _folder(first.stdout, "[1/1] one: complete (1/1 done; in ")
    # One run: the same run id in results.json, the same default folder (relative to where each ran).
    ids = [json.loads(p.read_text("utf-8"))["run_id"] for p in (alone / folder / "results.json", swept_folder / "results.json")]
    assert ids[0] == ids[1] and swept_folder == (swept / folder).resolve() and folder.name == f"loglikelihood-{ids[0]}"
    before = (swept_folder / "results.json").read_bytes()
    again = _sweep(swept, [{"name": "renamed", **_keys(tiny_model, 1)}])  # renamed: still the same run, complete
    assert again.returncode == 0 and f"[1/1] renamed: already complete in {folder}" in again.stdout, again.stdout + again.stderr
    edited = _sweep(swept, [{"name": "renamed", **_keys(tiny_model, 2)}])  # limit 1 -> 2: another run, computed
    assert edited.returncode == 0, edited.stdout + edited.stderr
    assert "already complete" not in edited.stdout
    new_folder = _folder(edited.stdout, "[1/1] renamed: complete (1/1 done; in ")
    doc = json.loads((new_folder / "results.json").read_text("utf-8"))
    assert new_folder != swept_folder and new_folder.name == f"loglikelihood-{doc['run_id']}"
    assert doc["run_identity"]["limit"] == 2 and doc["results"]["wic"]["p1"]["n"] == 2
    assert (swept_folder / "results.json").read_bytes() == before  # the first run untouched
    assert "report of 1 runs" in edited.stdout and (swept / "report" / "report.json").is_file()


def test_an_identity_edited_by_hand_is_not_complete(tiny_model: Path, tmp_path: Path) -> None:
    first = _sweep(tmp_path, [{"name": "one", "output_dir": "out", **_keys(tiny_model, 1)}])
    assert first.returncode == 0, first.stdout + first.stderr
    doc = json.loads((tmp_path / "out" / "results.json").read_text("utf-8"))
    doc["run_identity"]["limit"] = 3  # says another run, under the old run id: not believed
    (tmp_path / "out" / "results.json").write_text(json.dumps(doc), "utf-8")
    again = _sweep(tmp_path, [{"name": "one", "output_dir": "out", **_keys(tiny_model, 1)}])
    assert "already complete" not in again.stdout
    # Started, and `run` itself refuses the folder: it holds another identity.
    assert again.returncode == 1 and "[1/1] one: failed (exit 1): Error: " in again.stdout and "limit: 3 in the folder, 1 here" in again.stdout


def test_a_sweep_edited_in_its_thinking_settings_computes_the_change(tiny_model: Path, tmp_path: Path) -> None:
    # the tiny model has no <think> token: its markers given (issue 47), else the run is refused
    keys = {**_keys(tiny_model, 1), "tasks": "te", "setting": "ce", "thinking": "on", "max_thinking_tokens": 4, "think_markers": "<think>,</think>"}
    first = _sweep(tmp_path, [{"name": "think", **keys}])
    assert first.returncode == 0, first.stdout + first.stderr
    folder = _folder(first.stdout, "[1/1] think: complete (1/1 done; in ")
    assert folder.name.startswith("ce-thinking-")
    assert json.loads((folder / "results.json").read_text("utf-8"))["run_identity"]["thinking"]["max_thinking_tokens"] == 4
    for edit in ({"max_thinking_tokens": 8}, {"thinking": "off", "max_thinking_tokens": None}):  # each another run, computed
        edited = _sweep(tmp_path, [{"name": "think", **{k: v for k, v in {**keys, **edit}.items() if v is not None}}])
        assert edited.returncode == 0 and "already complete" not in edited.stdout, edited.stdout + edited.stderr
        new_folder = _folder(edited.stdout, "[1/1] think: complete (1/1 done; in ")
        identity = json.loads((new_folder / "results.json").read_text("utf-8"))["run_identity"]
        assert new_folder != folder and identity.get("thinking", {"on": False}) == (
            {"on": True, "think_markers": ["<think>", "</think>"], "max_thinking_tokens": 8, "trace_budget": 8}
            if edit.get("thinking") != "off" else {"on": False})
    again = _sweep(tmp_path, [{"name": "think", **keys}])  # the first entry again: its folder is complete
    assert f"[1/1] think: already complete in {folder.relative_to(tmp_path.resolve())}" in again.stdout, again.stdout + again.stderr


def test_options_given_override_the_config_file(tiny_model: Path, tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(json.dumps({**_keys(tiny_model, 1), "backend": "hf", "backend_args": {}, "output_dir": "out"}), "utf-8")
    ran = _cli(tmp_path, "run", "--config", "run.yaml", "--limit", "2", "--backend-arg", "data_parallel_size=1", "--no-progress")
    assert ran.returncode == 0, ran.stderr[-2000:]
    doc = json.loads((tmp_path / "out" / "results.json").read_text("utf-8"))
    assert doc["config"]["limit"] == 2 and doc["config"]["batch_size"] == 2 and doc["results"]["wic"]["p1"]["n"] == 2
    bad = _cli(tmp_path, "run", "--config", "run.yaml", "--num-fewshot", "1", "--backend-arg", "nope=1")
    assert bad.returncode == 1 and bad.stderr.strip().splitlines()[-1].startswith(
        "Error: run.yaml: key backend_args: --backend-arg nope: backend 'hf' has no such option")
    (tmp_path / "bad.yaml").write_text("model: m\nlimit: abc\n", "utf-8")
    said = _cli(tmp_path, "run", "--config", "bad.yaml")
    assert said.returncode == 1 and said.stderr.strip().splitlines() == ["Error: bad.yaml: key limit: expected an integer, got 'abc'"]


def test_replicas_beyond_the_machine_are_refused_before_ray_starts(tiny_model: Path, tmp_path: Path, ray_tmp: Path) -> None:
    cores = os.cpu_count() or 1
    ran = _cli(tmp_path, "run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "wic", "--limit", "1", "--device", "cpu",
               "--backend-arg", f"data_parallel_size={cores + 98}", "--output-dir", "out")
    assert ran.returncode == 1
    assert ran.stderr.strip().splitlines()[-1] == (
        f"Error: data_parallel_size={cores + 98}: {cores + 98} replicas need {cores + 98} CPUs (this machine has {cores}); nothing was started")
    assert not ray_tmp.exists() and not (tmp_path / "out").exists()  # no Ray session, no folder
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    swept = _sweep(tmp_path, [{"name": "big", "device": "cuda", **_keys(tiny_model, 1), "backend_args": {"data_parallel_size": cores + 1}}])
    short = [f"{cores + 1} CPUs (this machine has {cores})"] + ([f"{cores + 1} GPUs (this machine has {gpus})"] if gpus < cores + 1 else [])
    assert swept.returncode == 1 and swept.stderr.strip().splitlines()[-1] == (
        f"Error: sweep.json: run 1 (big): its replicas and GPUs need {' and '.join(short)}; nothing was started")
    assert not ray_tmp.exists() and not (tmp_path / "report").exists()


def test_a_sweep_file_with_a_bad_value_is_one_line_naming_file_run_and_key(tmp_path: Path, ray_tmp: Path) -> None:
    (tmp_path / "sweep.yaml").write_text("defaults: {data: d}\nruns:\n- {model: m, name: good}\n- {model: m, name: bad, num_fewshot: five}\n", "utf-8")
    said = _cli(tmp_path, "sweep", "sweep.yaml", "--out", "report")
    assert said.returncode == 1 and said.stderr.strip().splitlines() == [
        "Error: sweep.yaml: run 2 (bad): key num_fewshot: expected an integer, got 'five'"]
    assert not ray_tmp.exists() and not (tmp_path / "report").exists()  # refused before anything started

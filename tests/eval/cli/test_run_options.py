"""The options of `evalita-eval run` are the fields of `RunSpec` (eval/run_config.py), one for one: each
option is parsed by the spec, never by click; `--backend-arg` values are typed by the backend's options
(pydantic); the engine flags that aliased `--backend-arg` are gone, each one refused in one line naming
its `--backend-arg` spelling (on the command line and as a key of a --config file), through the real CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_eval.cli import main
from evalita_eval.run_config import REMOVED_FLAGS, RunSpec

# flag, the backend_arg it aliased
REMOVED = [("--tensor-parallel-size", "tensor_parallel_size"), ("--data-parallel-size", "data_parallel_size"),
           ("--gpu-memory-utilization", "gpu_memory_utilization"), ("--max-model-len", "max_model_len"),
           ("--base-url", "base_url"), ("--api-key-env", "api_key_env"), ("--concurrency", "concurrency"),
           ("--timeout", "timeout_s"), ("--max-retries", "max_retries")]


def _line(flag: str, name: str) -> str:
    return (f"Error: {flag} was removed: give --backend-arg {name}=VALUE (in a file: backend_args: {{{name}: VALUE}}); "
            "`evalita-eval backends` lists each backend's options")


def test_the_options_of_run_are_the_fields_of_run_spec() -> None:
    params = {p.name: p for p in main.commands["run"].params}
    assert set(params) == set(RunSpec.model_fields) | {"config"}
    for name, field in RunSpec.model_fields.items():
        flag = "--backend-arg" if name == "backend_args" else "--" + name.replace("_", "-")
        assert params[name].opts[0] == flag and params[name].help.startswith(field.description), name
    assert dict(REMOVED) == REMOVED_FLAGS


def test_a_removed_flag_is_one_line_through_the_real_cli(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", "m", "--data", "d", "--base-url", "http://h/v1"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == _line("--base-url", "base_url"), proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("flag", "name"), REMOVED, ids=[f for f, _ in REMOVED])
def test_each_removed_flag_names_its_backend_arg(flag: str, name: str, tmp_path: Path) -> None:
    said = CliRunner().invoke(main, ["run", "--model", "m", "--data", "d", f"{flag}=2"])
    assert said.exit_code == 2 and said.output.strip().splitlines()[-1] == _line(flag, name)
    config = tmp_path / "run.yaml"
    config.write_text(f"model: m\ndata: d\n{flag.removeprefix('--').replace('-', '_')}: 2\n", "utf-8")
    said = CliRunner().invoke(main, ["run", "--config", str(config)])
    key = flag.removeprefix("--").replace("-", "_")
    assert said.exit_code == 1 and said.output.strip().splitlines() == [
        f"Error: {config}: key {key}: " + _line(flag, name).removeprefix("Error: ")]


def _spec(monkeypatch: pytest.MonkeyPatch, args: list[str]):
    """The ``RunSpec`` that `run` builds from ``args`` (the run itself replaced), and the CLI's result."""
    seen = []
    monkeypatch.setattr("evalita_eval.cli.run.run_spec", seen.append)
    result = CliRunner().invoke(main, ["run", "--model", "m", "--data", "d", *args])
    return (seen[0] if seen else None), result


def test_backend_args_are_typed_by_the_backends_options(monkeypatch: pytest.MonkeyPatch) -> None:
    spec, said = _spec(monkeypatch, ["--backend", "vllm", "--backend-arg", "tensor_parallel_size=2", "--backend-arg",
                                     "gpu_memory_utilization=0.5", "--backend-arg", "vllm_engine_args={\"enforce_eager\": true}",
                                     "--backend-arg", "gguf_file=none", "--backend-arg", "data_parallel_size=3"])
    assert said.exit_code == 0, said.output
    assert spec.backend_args == {"tensor_parallel_size": 2, "gpu_memory_utilization": 0.5, "vllm_engine_args": {"enforce_eager": True},
                                 "gguf_file": None, "data_parallel_size": 3}
    assert type(spec.backend_args["tensor_parallel_size"]) is int
    for arg, message in [("gpu_memory_utilization=nan", "gpu_memory_utilization (backend 'vllm'): expected a finite number, got 'nan'"),
                         ("max_model_len=2.5", "max_model_len (backend 'vllm'): expected an integer, got '2.5'"),
                         ("data_parallel_size=0", "data_parallel_size: expected a number >= 1, got '0'")]:
        none, said = _spec(monkeypatch, ["--backend", "vllm", "--backend-arg", arg])
        assert none is None and said.exit_code == 2 and said.output.strip().splitlines()[-1] == f"Error: --backend-arg {message}" + (
            " (the replicas of the model)" if arg.startswith("data_") else ""), said.output


def test_run_help_names_backend_arg_and_no_removed_flag(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and "--backend-arg KEY=VALUE" in proc.stdout and "--max-thinking-tokens INTEGER" in proc.stdout
    assert [flag for flag, _ in REMOVED if flag in proc.stdout.split()] == []


def test_the_options_table_of_the_docs_is_run_spec() -> None:
    """docs/evaluator.md's table of `run`'s options names each field of RunSpec (and --config), no other."""
    import re

    doc = (Path(__file__).resolve().parents[3] / "docs" / "evaluator.md").read_text("utf-8")
    table = doc.split("| option | meaning |", 1)[1].split("\n\n", 1)[0]
    named = {m for row in table.splitlines() if row.startswith("| `") for m in re.findall(r"--([a-z][a-z-]*)", row.split(" | ")[0])}
    fields = {("backend-arg" if name == "backend_args" else name.replace("_", "-")) for name in RunSpec.model_fields}
    assert {n for n in named if not (n.startswith("no-") and n[3:] in fields)} == fields | {"config"}

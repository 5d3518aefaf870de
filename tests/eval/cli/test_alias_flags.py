"""The hidden engine flags of `evalita-eval run` (eval/cli/run_options.py), aliases of `--backend-arg NAME=VALUE`
kept for one release (docs/evaluator.md, "For users of the alias flags"): each one, through the real CLI, prints
its one-line note naming the `--backend-arg` spelling and stops at the next check (no data given) without a
traceback; folded by the CLI into the run's `RunSpec` as that backend_arg, typed, never carried as a field of
its own; the same run as the `--backend-arg` spelling; refused with one line when a `--backend-arg` of another
value is also given; and hidden from `run --help`."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from evalita_eval.api import BackendOptions
from evalita_eval.backend_support.options import ENGINE_FLAGS, resolve_options
from evalita_eval.backends import get_backend_class
from evalita_eval.cli import main
from evalita_eval.run_config import backend_options

# flag, a backend that takes it, the value as typed on the command line, the backend_arg it aliases, that
# value typed as the backend declares it, and another value (for the disagreement).
ALIASES = [
    ("--tensor-parallel-size", "vllm", "2", "tensor_parallel_size", 2, "3"),
    ("--data-parallel-size", "vllm", "2", "data_parallel_size", 2, "4"),
    ("--gpu-memory-utilization", "vllm", "0.5", "gpu_memory_utilization", 0.5, "0.9"),
    ("--max-model-len", "vllm", "512", "max_model_len", 512, "1024"),
    ("--base-url", "openai-completions", "http://127.0.0.1:9/v1", "base_url", "http://127.0.0.1:9/v1", "http://127.0.0.1:8/v1"),
    ("--api-key-env", "openai-chat", "MY_KEY", "api_key_env", "MY_KEY", "OTHER_KEY"),
    ("--concurrency", "openai-completions", "3", "concurrency", 3, "5"),
    ("--timeout", "openai-completions", "7.5", "timeout_s", 7.5, "60"),
    ("--max-retries", "openai-chat", "0", "max_retries", 0, "2"),
]
IDS = [row[0] for row in ALIASES]


def test_the_table_holds_every_hidden_flag_of_run() -> None:
    hidden = sorted(next(o for o in p.opts if o.startswith("--")) for p in main.commands["run"].params if getattr(p, "hidden", False))
    assert hidden == sorted(IDS) == sorted(flag for flag, _default in ENGINE_FLAGS.values())
    assert {(row[0], row[3]) for row in ALIASES} == {(flag, name) for name, (flag, _default) in ENGINE_FLAGS.items()}


@pytest.mark.parametrize(("flag", "backend", "given", "name", "typed", "other"), ALIASES, ids=IDS)
def test_each_alias_flag_prints_its_note_through_the_real_cli(flag: str, backend: str, given: str, name: str, typed, other: str,
                                                              tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", "m", "--backend", backend, flag, given],
                          capture_output=True, text=True, cwd=tmp_path)
    key = flag.removeprefix("--").replace("-", "_")
    note = (f"note: {flag} ({key}: in a file) is an alias of --backend-arg {name}={typed} "
            f"(in a file: backend_args: {{{name}: {typed}}}), kept for one release")
    lines = proc.stderr.splitlines()
    # The note, once, first; then the next check of `run` stops it (no --data): nothing else was started.
    assert proc.returncode == 2 and lines[0] == note and lines.count(note) == 1, proc.stderr
    assert lines[-1] == "Error: give exactly one of --data DIR or --hub-org ORG" and "Traceback" not in proc.stderr


def _spec(monkeypatch: pytest.MonkeyPatch, args: list[str]):
    """The ``RunSpec`` that `run` builds from ``args`` (the run itself replaced), and the CLI's result."""
    seen = []
    monkeypatch.setattr("evalita_eval.cli.run.run_spec", seen.append)
    result = CliRunner().invoke(main, ["run", "--model", "m", *args])
    return (seen[0] if seen else None), result


@pytest.mark.parametrize(("flag", "backend", "given", "name", "typed", "other"), ALIASES, ids=IDS)
def test_each_alias_flag_is_folded_into_the_run_spec_as_its_backend_arg(flag: str, backend: str, given: str, name: str, typed, other: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    spec, result = _spec(monkeypatch, ["--backend", backend, flag, given])
    assert result.exit_code == 0, result.output
    assert spec.backend_args == {name: typed} and type(spec.backend_args[name]) is type(typed)
    # Folded, not carried: the alias's own field of the spec is empty.
    assert all(getattr(spec, alias.removeprefix("--").replace("-", "_")) is None for alias, _default in ENGINE_FLAGS.values())
    # The run the --backend-arg spelling describes: the backend resolves both to the same typed options.
    spelled, said = _spec(monkeypatch, ["--backend", backend, "--backend-arg", f"{name}={given}"])
    assert said.exit_code == 0 and "note:" not in said.output, said.output
    cls = get_backend_class(backend)
    assert resolve_options(cls, backend_options(spec, "cpu"))[1] == resolve_options(cls, backend_options(spelled, "cpu"))[1]
    assert getattr(resolve_options(cls, BackendOptions(model="m", extra=spec.backend_args))[1], name) == typed
    # Given with a --backend-arg of the same value it is one option; of another value, one line naming both.
    same, agreed = _spec(monkeypatch, ["--backend", backend, flag, given, "--backend-arg", f"{name}={given}"])
    assert agreed.exit_code == 0 and same.backend_args == {name: typed}, agreed.output
    none, refused = _spec(monkeypatch, ["--backend", backend, flag, given, "--backend-arg", f"{name}={other}"])
    assert none is None and refused.exit_code == 1
    assert refused.output.splitlines() == [f"Error: {flag}: {typed!r} disagrees with backend_args {name}: {other!r}; give one"]


def test_an_alias_flag_of_an_option_the_backend_lacks_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    spec, result = _spec(monkeypatch, ["--backend", "openai-completions", "--max-model-len", "512"])
    assert spec is None and result.exit_code == 1
    assert result.output.splitlines()[-1].startswith(
        "Error: --backend-arg max_model_len (--max-model-len): backend 'openai-completions' has no such option")


def test_run_help_hides_the_alias_flags_and_names_backend_arg(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0 and "--backend-arg KEY=VALUE" in proc.stdout
    assert [flag for flag in IDS if flag in proc.stdout.split()] == []

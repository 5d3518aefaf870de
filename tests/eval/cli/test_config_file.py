"""The files of options, `run --config FILE` and sweep files (one reader: eval/config_file.py), through the real
CLI: values typed strictly (a `true` is no limit, a quoted number no number), a key given twice, a YAML alias (a
bomb among them), a file too large and a file that is no regular file are each one line naming the file (and the
line or key), showing at most a short excerpt of a bad value; an option on the command line overrides the file
key by key (`--backend-arg base_url=...` over `backend_args: {base_url: ...}`); the removed engine-flag keys are refused
in one line naming their `backend_args` spelling."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_eval.cli import main

# The rule checked once every value is typed (RunSpec's): the options were accepted.
NO_DATA = "key data: give exactly one of --data DIR or --hub-org ORG"


def _cli(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _refused(cwd: Path, text: str, name: str = "run.yaml") -> list[str]:
    (cwd / name).write_text(text, "utf-8")
    said = _cli(cwd, "run", "--config", name)
    assert said.returncode == 1 and "Traceback" not in said.stderr, said.stderr[-2000:]
    return said.stderr.strip().splitlines()


@pytest.mark.parametrize(("text", "line"), [
    ("model: m\nlimit: true\n", "key limit: expected an integer, got True"),
    ("model: m\nnum_fewshot: yes\n", "key num_fewshot: expected an integer, got True"),
    ("model: m\nlimit: '3'\n", "key limit: expected an integer, got '3'"),
    ("model: m\nbatch_size: '8'\n", "key batch_size: expected a positive integer or auto, got '8'"),
    ("model: m\nseed: 12.0\n", "key seed: expected an integer, got 12.0"),
    ("model: m\napply_chat_template: 'yes'\n", "key apply_chat_template: expected true or false, got 'yes'"),
    ("model: m\nrevision: 2024\n", "key revision: expected a string, got 2024"),
    ("model: m\nbackend: openai-completions\nbackend_args: {concurrency: '3'}\n",
     "key backend_args.concurrency: expected int, not the string '3'"),
    ("model: m\nbackend_args: {data_parallel_size: '2'}\n", "key backend_args.data_parallel_size: expected int, not the string '2'"),
], ids=["bool-limit", "yes-fewshot", "string-limit", "string-batch", "float-seed", "string-flag", "int-revision", "string-arg",
        "string-replicas"])
def test_a_value_of_another_type_is_refused_never_converted(tmp_path: Path, text: str, line: str) -> None:
    assert _refused(tmp_path, text) == [f"Error: run.yaml: {line}"]


def test_the_same_keys_typed_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text("model: m\nlimit: 3\nnum_fewshot: 1\nbatch_size: auto\nthinking: on\nmax_memory: 4GiB\n"
                                       "backend: openai-completions\nbackend_args: {concurrency: 3, timeout_s: 60}\n", "utf-8")
    said = _cli(tmp_path, "run", "--config", "run.yaml")
    assert said.returncode == 1 and said.stderr.strip().splitlines() == [f"Error: run.yaml: {NO_DATA}"], said.stderr


def test_a_key_given_twice_is_refused_naming_the_key_and_its_lines(tmp_path: Path) -> None:
    assert _refused(tmp_path, "model: m\nlimit: 2\nlimit: 3\n") == ["Error: run.yaml: line 3: key 'limit' given twice (first on line 2)"]
    assert _refused(tmp_path, '{"model": "m", "backend_args": {"gguf_file": "a", "gguf_file": "b"}}', "run.json") == [
        "Error: run.json: line 1: key 'gguf_file' given twice (first on line 1)"]
    (tmp_path / "sweep.yaml").write_text("- {model: m, name: a}\n- model: m\n  limit: 2\n  limit: 3\n", "utf-8")
    said = _cli(tmp_path, "sweep", "sweep.yaml")
    assert said.returncode == 1 and said.stderr.strip().splitlines() == [
        "Error: sweep.yaml: line 4: key 'limit' given twice (first on line 3)"]


def _bomb(levels: int) -> str:
    """The billion-laughs shape under a typed key: each level nine aliases of the one before."""
    lines = ['  - &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"  - &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, levels)]
    return "model: m\nlimit:\n" + "\n".join(lines) + "\n"


def test_a_yaml_alias_is_refused_at_its_line_and_a_bomb_with_it(tmp_path: Path) -> None:
    assert _refused(tmp_path, "model: &m org/model\nmodel_name: *m\n") == [
        "Error: run.yaml: line 2: a YAML alias (*name) is not accepted: write the value out"]
    # 6 levels: 531,441 strings once expanded (the message printing them was 3.85 million characters).
    assert _refused(tmp_path, _bomb(6)) == ["Error: run.yaml: line 4: a YAML alias (*name) is not accepted: write the value out"]
    (tmp_path / "sweep.yaml").write_text("defaults: &d {model: m}\nruns:\n- *d\n", "utf-8")
    said = _cli(tmp_path, "sweep", "sweep.yaml")
    assert said.returncode == 1 and said.stderr.strip().splitlines() == [
        "Error: sweep.yaml: line 3: a YAML alias (*name) is not accepted: write the value out"]


def test_a_long_bad_value_is_shown_as_a_short_excerpt(tmp_path: Path) -> None:
    (line,) = _refused(tmp_path, f"model: m\nlimit: '{'x' * 100_000}'\n")
    assert line.startswith("Error: run.yaml: key limit: expected an integer, got 'xxx") and "...x" in line and len(line) < 120


def test_a_file_too_large_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    assert _refused(tmp_path, "model: m\n" + " " * (1 << 20) + "\n") == ["Error: run.yaml: larger than 1024 KiB: not a file of options"]


def test_a_file_that_is_no_regular_file_is_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)  # read, it would wait for a writer forever
    for path in (fifo, Path(os.devnull)):
        for args in (["run", "--config", str(path)], ["sweep", str(path)]):
            said = _cli(tmp_path, *args, timeout=60)
            assert said.returncode == 1 and said.stderr.strip().splitlines() == [
                f"Error: {path}: not a regular file (a YAML or JSON file was expected)"], said.stderr


def test_the_command_line_overrides_the_file_key_by_key(tmp_path: Path) -> None:
    (tmp_path / "args.yaml").write_text("model: m\nbackend: openai-completions\nbackend_args: {base_url: 'http://127.0.0.1:8/v1'}\n"
                                        "limit: 2\n", "utf-8")
    said = _cli(tmp_path, "run", "--config", "args.yaml", "--backend-arg", "base_url=http://127.0.0.1:9/v1", "--limit", "3")
    assert said.returncode == 1 and said.stderr.strip().splitlines() == [f"Error: args.yaml: {NO_DATA}"], said.stderr
    # A value given on the command line is named as its option, not as the file's key.
    said = _cli(tmp_path, "run", "--config", "args.yaml", "--limit", "x")
    assert said.returncode == 1 and said.stderr.strip().splitlines() == ["Error: --limit: expected an integer, got 'x'"]
    # The engine flags' keys are gone from files as from the command line: one line naming the backend_args spelling.
    (tmp_path / "alias.yaml").write_text("model: m\nbackend: openai-completions\nbase_url: 'http://127.0.0.1:8/v1'\n", "utf-8")
    said = _cli(tmp_path, "run", "--config", "alias.yaml", "--backend-arg", "base_url=http://127.0.0.1:9/v1")
    assert said.returncode == 1 and said.stderr.strip().splitlines() == [
        "Error: alias.yaml: key base_url: --base-url was removed: give --backend-arg base_url=VALUE (in a file: "
        "backend_args: {base_url: VALUE}); `evalita-eval backends` lists each backend's options"]


def test_the_spec_holds_the_command_line_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "args.yaml").write_text("model: m\ndata: d\nbackend: openai-completions\n"
                                        "backend_args: {base_url: 'http://a/v1', concurrency: 2}\nlimit: 2\n")
    seen: list = []
    monkeypatch.setattr("evalita_eval.cli.run.run_spec", seen.append)
    result = CliRunner().invoke(main, ["run", "--config", str(tmp_path / "args.yaml"), "--backend-arg", "base_url=http://b/v1",
                                       "--limit", "3"])
    assert result.exit_code == 0, result.output
    spec = seen.pop()
    assert spec.backend_args == {"base_url": "http://b/v1", "concurrency": 2} and spec.limit == 3

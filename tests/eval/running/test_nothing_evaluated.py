"""A run that evaluated nothing exits 1, says why for each task, and is never recorded as complete.

Skip reasons are true: the official Hub source unreachable is an error naming the Hub's
host, not a task "without a test split".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Sequence

import pytest
from click.testing import CliRunner

from evalita_eval.api import Backend, BackendOptions, Capabilities, LLRequest, LLResult
from evalita_eval.cli import main
from evalita_eval.sources.entries import all_entries

from paths import TEST_DATA

DATA = TEST_DATA / "build"


def _error_of_every_task_run(env: dict, model: Path, tmp_path: Path, *data: str) -> str:
    """The one error line of `run` over every task (no --tasks) in a subprocess with ``env``
    (huggingface_hub reads it at import): exit 1, no traceback, no false "no split", no results."""
    full = {**os.environ, **env, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "2"}
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(model), *data, "--output-dir", str(tmp_path / "o")],
                          env=full, capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "no split" not in proc.stdout + proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "o" / "results.json").exists()
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1, proc.stderr[-2000:]
    return errors[0]


@pytest.mark.parametrize("env, host", [({"HF_HUB_OFFLINE": "1"}, "https://huggingface.co"), ({"HF_ENDPOINT": "http://127.0.0.1:9"}, "http://127.0.0.1:9")],
                         ids=["offline", "refused"])
def test_official_splits_without_the_hub_say_it_is_unreachable(env: dict, host: str, tiny_model: Path, tmp_path: Path) -> None:
    error = _error_of_every_task_run(env, tiny_model, tmp_path, "--data", "hf:evalitahf")
    assert f"cannot reach the Hub at {host} for the dataset evalitahf/" in error, error


def test_a_hub_org_without_the_hub_says_it_is_unreachable(tiny_model: Path, tmp_path: Path) -> None:
    error = _error_of_every_task_run({"HF_HUB_OFFLINE": "1"}, tiny_model, tmp_path, "--hub-org", "evalita-llm")
    assert "hf://datasets/evalita-llm/" in error and "the Hub at https://huggingface.co cannot be reached" in error


def test_a_build_of_unknown_tasks_only_exits_1_naming_them(tiny_model: Path, tmp_path: Path) -> None:
    build = tmp_path / "build"
    (build / "mytask").mkdir(parents=True)
    shutil.copyfile(DATA / "te" / "test.jsonl", build / "mytask" / "test.jsonl")
    (build / "manifest.json").write_text(json.dumps({"tasks": {"mytask": {"splits": {}}}}), "utf-8")
    result = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(build), "--output-dir", str(tmp_path / "o")])
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    skipped = [ln for ln in lines if ": skipped, " in ln]
    assert len(skipped) == len(all_entries()) and all(f"skipped, {build} has no split '" in ln for ln in skipped), result.output
    error = [ln for ln in lines if ln.startswith("Error:")]
    assert len(error) == 1 and "nothing was evaluated" in error[0] and "not registered here: mytask" in error[0], result.output
    assert not (tmp_path / "o" / "results.json").exists()  # the model was never loaded
    (build / "manifest.json").unlink()  # not even a build: refused, naming what it holds
    result = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(build), "--output-dir", str(tmp_path / "o")])
    assert result.exit_code == 1 and f"{build} is not a build folder (no manifest.json; no <task>/ folder of " in result.output
    assert "; it holds mytask)" in result.output, result.output


class _Scorer(Backend):
    name = "scorer"
    capabilities = Capabilities(loglikelihood=True, generate=False, chat_template=False)

    @classmethod
    def from_options(cls, options: BackendOptions) -> "_Scorer":
        return cls()

    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        raise AssertionError("nothing may be evaluated")


def test_results_of_a_run_that_evaluated_nothing_say_empty_with_the_reasons(tmp_path: Path) -> None:
    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.run_config import RunSpec
    from evalita_eval.sources.entries import select_entries
    from evalita_eval.sources.folder import FolderSource

    build = tmp_path / "build"
    build.mkdir()
    (build / "manifest.json").write_text('{"tasks": {}}', "utf-8")
    out = tmp_path / "o"
    result = Runner(_Scorer(), ModelInfo("m", None, "none", "scorer"), FolderSource(build), RunSpec(model="m", data="data", progress=False),
                    out, echo=lambda _m: None).run(select_entries(["te", "wic"]))
    doc = json.loads((out / "results.json").read_text("utf-8"))
    assert result.record.status == doc["status"] == "empty" and doc["results"] == {}
    assert doc["skipped"] == {"te": f"{build} has no split 'test'", "wic": f"{build} has no split 'test'"}
    from evalita_eval.record import read_run
    from evalita_eval.record import RecordError

    with pytest.raises(RecordError, match=r"a run that evaluated nothing \(2 task\(s\) skipped: te: .* has no split 'test'; wic: "):
        read_run(out / "results.json")


def test_raw_folder_as_data_fails_before_torch_and_datasets_load(tmp_path: Path) -> None:
    """Issue 40: `--data raw` failed after 45-55 s of imports and model loading; now before any of them."""
    from paths import TEST_DATA

    script = ("import sys\nfrom click.testing import CliRunner\nfrom evalita_eval.cli import main\n"
              f"r = CliRunner().invoke(main, ['run', '--model', {str(tmp_path)!r}, '--data', {str(TEST_DATA / 'raw')!r}])\n"
              "print(r.exit_code, sorted(m for m in ('torch', 'datasets', 'transformers') if m in sys.modules))\nprint(r.output)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    first, output = proc.stdout.split("\n", 1)
    assert first == "1 []", proc.stdout + proc.stderr
    assert f"Error: {TEST_DATA / 'raw'} is not a build folder (no manifest.json; " in output


def test_a_run_of_a_local_folder_never_imports_datasets(tiny_model: Path, tmp_path: Path) -> None:
    """datasets (with pandas and pyarrow: 88 MiB resident) reads only the official copies on the Hub: a run of a
    local build folder does without it (issue 48: the FAQ task's peak memory)."""
    from paths import TEST_DATA

    script = ("import sys\nfrom click.testing import CliRunner\nfrom evalita_eval.cli import main\n"
              f"r = CliRunner().invoke(main, ['run', '--model', {str(tiny_model)!r}, '--data', {str(TEST_DATA / 'build')!r}, "
              f"'--tasks', 'faq', '--limit', '1', '--output-dir', {str(tmp_path / 'out')!r}])\n"
              "print(r.exit_code, sorted(m for m in ('torch', 'datasets', 'pandas', 'pyarrow') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.stdout.splitlines()[0] == "0 ['torch']", proc.stdout + proc.stderr

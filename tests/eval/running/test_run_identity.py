"""A run's identity (eval/running/identity.py): every input that can change a number names its default
folder, a folder of another identity is refused (or replaced with --overwrite), and an invocation of
the same identity resumes and extends it without dropping what it holds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_eval.cli import main
from evalita_eval.running.identity import first_difference

from paths import TEST_DATA

DATA = TEST_DATA / "build"
QUICK = ["--data", str(DATA), "--tasks", "wic", "--prompts", "p1", "--limit", "1", "--no-progress"]


def _folder_of(model: Path, *args: str) -> Path:
    """The default output folder of one quick run (run in the current folder)."""
    result = CliRunner().invoke(main, ["run", "--model", str(model), *QUICK, *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    folder = Path(result.output.split("writing to ", 1)[1].split("\n", 1)[0])
    assert (folder / "results.json").is_file()
    return folder


def test_runs_that_differ_in_a_number_changing_input_never_share_a_default_folder(tiny_model: Path, tmp_path: Path,
                                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from tiny_model import build_tiny_model

    # Another model whose folder has the same name (and other weights): the lost SmolLM2 results.
    other = build_tiny_model(tmp_path / "elsewhere" / tiny_model.name, seed=1)
    monkeypatch.chdir(tmp_path)
    variants = {
        "plain": (tiny_model,), "chat template": (tiny_model, "--apply-chat-template"),
        "system instruction": (tiny_model, "--apply-chat-template", "--system-instruction", "Rispondi."),
        "dtype": (tiny_model, "--dtype", "bfloat16"), "model": (other,),
    }
    folders = {name: _folder_of(model, *args) for name, (model, *args) in variants.items()}
    assert len(set(folders.values())) == len(variants), folders
    for name, folder in folders.items():
        # readable: results/<model>/<setting>-<run id>, the run id being the one results.json records
        doc = json.loads((folder / "results.json").read_text("utf-8"))
        assert folder.parts[:2] == ("results", tiny_model.name) and folder.name == f"loglikelihood-{doc['run_id']}", name
    again = _folder_of(tiny_model, "--apply-chat-template")  # the same run again: its own folder, resumed
    assert again == folders["chat template"]


def _cli(model: Path, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(model), *QUICK, "--output-dir", str(out), *args],
                          capture_output=True, text=True)


def test_a_folder_of_another_run_is_refused_then_replaced_with_overwrite(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _cli(tiny_model, out).returncode == 0
    before = (out / "results.json").read_bytes()
    refused = _cli(tiny_model, out, "--apply-chat-template")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == (
        f"Error: {out} holds the results of another run (apply_chat_template: false in the folder, true here); "
        "choose another --output-dir, or pass --overwrite to replace them")
    assert (out / "results.json").read_bytes() == before  # untouched
    replaced = _cli(tiny_model, out, "--apply-chat-template", "--overwrite")
    assert replaced.returncode == 0, replaced.stderr[-2000:]
    doc = json.loads((out / "results.json").read_text("utf-8"))
    assert doc["run_identity"]["apply_chat_template"] is True and doc["config"]["apply_chat_template"] is True


def test_resuming_the_same_run_adds_tasks_and_a_prompt_subset_is_refused(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    runner = CliRunner()
    base = ["run", "--model", str(tiny_model), "--data", str(DATA), "--limit", "1", "--no-progress", "--output-dir", str(out)]
    assert runner.invoke(main, [*base, "--tasks", "wic"]).exit_code == 0
    wic = json.loads((out / "results.json").read_text("utf-8"))["results"]["wic"]
    assert runner.invoke(main, [*base, "--tasks", "te"]).exit_code == 0
    doc = json.loads((out / "results.json").read_text("utf-8"))
    assert set(doc["results"]) == {"wic", "te"} and doc["results"]["wic"] == wic  # kept, not dropped
    assert set(doc["tasks"]["planned"]) == {"wic", "te"} and set(doc["timing"]) == {"wic", "te"}
    assert set(doc["task_versions"]) == {"wic", "te"} and doc["task_versions"]["te"]["version"] == 1
    assert set(doc["task_versions"]["te"]["prompts"]) == set(doc["results"]["te"])
    # the metrics it was scored with, headline first, as reports read them (reporting/task_report.py)
    assert doc["task_versions"]["te"]["metrics"] == [{"name": n, "kind": "hits", "higher_is_better": True} for n in ("acc", "acc_norm", "acc_bytes")]
    subset = runner.invoke(main, [*base, "--tasks", "wic", "--prompts", "p1"])
    assert subset.exit_code == 1 and 'prompts: null in the folder, ["p1"] here' in subset.output
    assert set(json.loads((out / "results.json").read_text("utf-8"))["results"]["wic"]) == set(wic)  # never shrunk


def test_first_difference_names_the_first_differing_input() -> None:
    folder = {"model": {"dtype": "float32", "backend": "hf"}, "limit": None}
    assert first_difference(folder, folder) is None
    assert first_difference(folder, {**folder, "model": {"dtype": "bfloat16", "backend": "hf"}}) == \
        'model.dtype: "float32" in the folder, "bfloat16" here'
    assert first_difference(folder, {**folder, "limit": 5}) == "limit: null in the folder, 5 here"


def test_an_unreadable_or_older_results_json_is_refused(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text("{not json", "utf-8")
    runner = CliRunner()
    args = ["run", "--model", str(tiny_model), *QUICK, "--output-dir", str(out)]
    refused = runner.invoke(main, args)
    assert refused.exit_code == 1 and f"{out / 'results.json'} is unreadable" in refused.output
    (out / "results.json").write_text(json.dumps({"status": "complete", "results": {}}), "utf-8")
    older = runner.invoke(main, args)
    assert older.exit_code == 1 and "records no run identity" in older.output
    shutil.rmtree(out / "samples", ignore_errors=True)
    assert runner.invoke(main, [*args, "--overwrite"]).exit_code == 0

"""The smaller traps of a newcomer's first hour (issue 32, point 6), each with its real outcome: an exported
dataset_path that survives the next build, validate against the manifest, a named task without originals that
installs nothing, and the reason and source of a task skipped in `run`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evalita_data.building.pipeline import build
from evalita_data.cli import main as data_main

from paths import TESTS

HERE = TESTS
RAW = HERE / "data" / "raw"


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def wic_build(tmp_path: Path) -> Path:
    """`evalita-data build --task wic` of the test originals: evalita-build, a link to its version folder."""
    out = tmp_path / "evalita-build"
    build(RAW, out, tasks=["wic"], progress=False)
    assert out.is_symlink()
    return out


def test_export_lm_eval_names_the_link_not_the_version(wic_build: Path, tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "export-lm-eval", "tasks", "--data-dir", "evalita-build"],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    doc = yaml.load((tmp_path / "tasks" / "evalita-llm_wic_p1.yaml").read_text("utf-8"), Loader=yaml.BaseLoader)  # noqa: S506
    assert doc["dataset_path"] == str(tmp_path / "evalita-build" / "wic")
    build(RAW, wic_build, tasks=["wic"], progress=False)  # the next build deletes the version the first one wrote
    assert (Path(doc["dataset_path"]) / "test.jsonl").is_file()


def test_validate_compares_the_files_with_the_manifest(wic_build: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(data_main, ["validate", str(wic_build)]).output.startswith("ok: ")
    test = wic_build / "wic" / "test.jsonl"
    lines = test.read_text("utf-8").splitlines(keepends=True)
    record = json.loads(lines[0])
    record["label"] = 1 - record["label"]  # a gold label edited by hand: still a valid record
    test.write_text(json.dumps(record, ensure_ascii=False) + "\n" + "".join(lines[1:]), "utf-8")
    result = runner.invoke(data_main, ["validate", str(wic_build)])
    assert result.exit_code == 1
    problems = [ln for ln in result.output.splitlines() if ln.startswith(str(test))]
    assert len(problems) == 1 and "differs from" in problems[0] and "the file changed after the build" in problems[0], result.output
    test.write_text("".join(lines[1:]), "utf-8")  # a record removed: rows and sha256 both differ
    result = runner.invoke(data_main, ["validate", str(wic_build)])
    assert result.exit_code == 1
    assert f"{test}: {len(lines) - 1} rows, {wic_build / 'manifest.json'} says {len(lines)}" in result.output
    (wic_build / "wic" / "extra.jsonl").write_text(lines[0], "utf-8")
    assert f"{wic_build / 'wic' / 'extra.jsonl'}: not in" in runner.invoke(data_main, ["validate", str(wic_build)]).output


def test_a_named_task_without_originals_installs_nothing(wic_build: Path, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(RAW / "wic", raw / "wic")
    (raw / "te").mkdir()  # no originals
    before, link = tree(wic_build), os.readlink(wic_build)
    result = CliRunner().invoke(data_main, ["build", "--raw", str(raw), "--out", str(wic_build), "--task", "te"])
    assert result.exit_code == 1
    assert "te: NOT BUILT (missing)" in result.output
    assert f"1 task(s) asked for not built: te (see above for what is missing); nothing installed, {wic_build} was left as it was" in result.output
    assert os.readlink(wic_build) == link and tree(wic_build) == before
    assert [p.name for p in (tmp_path / ".evalita-build.versions").iterdir() if not p.name.startswith(".")] == [Path(link).name]
    # all tasks (none named): what can be built is, the rest reported, exit 0
    result = CliRunner().invoke(data_main, ["build", "--raw", str(raw), "--out", str(wic_build)])
    assert result.exit_code == 0 and os.readlink(wic_build) != link


def test_run_skips_a_task_without_originals_with_the_reason_and_source(wic_build: Path, tmp_path: Path, tiny_model: Path) -> None:
    from evalita_eval.cli import main as eval_main

    raw = tmp_path / "raw"
    shutil.copytree(RAW / "wic", raw / "wic")
    for task in ("at", "ls", "sum"):
        (raw / task).mkdir()  # folders without the originals
    build(raw, wic_build, progress=False)  # every task: only wic has originals
    result = CliRunner().invoke(eval_main, ["run", "--model", str(tiny_model), "--data", str(wic_build), "--limit", "1", "--prompts", "p1",
                                            "--output-dir", str(tmp_path / "o"), "--no-progress"])
    assert result.exit_code == 0, result.output
    for task in ("te", "at", "ls", "sum"):
        line = next(ln for ln in result.output.splitlines() if ln.startswith(f"{task}: skipped, "))
        assert line.startswith(f"{task}: skipped, {wic_build} has no split 'test' (not built: {task}: "), line
        assert f"raw/{task}/" in line and line.endswith(f"See `evalita-data fetch {task}`.)"), line
    doc = json.loads((tmp_path / "o" / "results.json").read_text("utf-8"))
    assert doc["skipped"]["te"].endswith("See `evalita-data fetch te`.)")
    # the reasons name the tasks evaluated, not those skipped
    assert doc["not_comparable_with_paper"] == ["--limit 1: only the first 1 items of each task",
                                                "--prompts p1: leaves out wic p2, wic p3, wic p4, wic p5, wic p6"]

"""`evalita-eval run --hub-org` against the loopback Hub stub: the same results as from the build."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub")

from publish_fixtures import hub, hub_env, run_cli, sample_build  # noqa: E402,F401 - fixtures


def test_run_from_the_hub_equals_run_from_the_build(sample_build: Path, hub, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    env = hub_env(hub, tmp_path / "hf")
    pushed = run_cli(["push", "--build", str(sample_build), "--org", "evalita-llm", "--task", "te", "--task", "ner"], env)
    assert pushed.returncode == 0, pushed.stderr
    common = ["--model", str(tiny_model), "--tasks", "te,ner_fic", "--prompts", "p1", "--limit", "2", "--max-new-tokens", "4"]
    runs = {}
    for name, source in (("hub", ["--hub-org", "evalita-llm"]), ("build", ["--data", str(sample_build)])):
        out = tmp_path / name
        proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", *common, *source, "--output-dir", str(out)],
                              env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[name] = json.loads((out / "results.json").read_text("utf-8"))
    assert runs["hub"]["data"]["source"] == "hf://evalita-llm"
    assert runs["hub"]["results"] == runs["build"]["results"]
    assert runs["hub"]["results"]["te"]["p1"]["n"] == 2
    # split hashes come from the published manifest.json: the same as the build's files
    assert runs["hub"]["data"]["manifest_sha256"] == runs["build"]["data"]["manifest_sha256"]


def test_hub_data_that_differ_from_their_manifest_stop_the_run_not_skip_the_task(
        sample_build: Path, hub, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    """A run of every task (no --tasks) skips the tasks the organisation has not published, but a published split
    whose records differ from its manifest.json is refused in one line, never reported as a missing split."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    env = hub_env(hub, tmp_path / "hf")
    pushed = run_cli(["push", "--build", str(sample_build), "--org", "evalita-llm", "--task", "te"], env)
    assert pushed.returncode == 0, pushed.stderr
    cmd = [sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(tiny_model), "--hub-org", "evalita-llm",
           "--prompts", "p1", "--limit", "1", "--max-new-tokens", "2"]
    first = subprocess.run([*cmd, "--output-dir", str(tmp_path / "a")], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads((tmp_path / "a" / "results.json").read_text("utf-8"))["results"]["te"]["p1"]["n"] == 1
    # Edit one record of the split huggingface_hub cached (a valid Parquet file, other content).
    cached = next((tmp_path / "hf").rglob("datasets--evalita-llm--te/snapshots/*/data/test*.parquet")).resolve()
    rows = pq.read_table(cached).to_pylist()
    key = next(k for k, v in rows[0].items() if isinstance(v, str) and len(v) > 3 and k != "id")
    rows[0][key] += " (edited)"
    pq.write_table(pa.Table.from_pylist(rows), cached)
    second = subprocess.run([*cmd, "--output-dir", str(tmp_path / "b")], env=env, capture_output=True, text=True)
    assert second.returncode == 1, second.stdout[-2000:] + second.stderr[-2000:]
    errors = [line for line in second.stderr.splitlines() if line.startswith(("error:", "Error:"))]
    assert len(errors) == 1 and "hf://datasets/evalita-llm/te" in errors[0] and "differs from" in errors[0], second.stderr
    assert "has no split" not in second.stdout + second.stderr
    assert not (tmp_path / "b" / "results.json").exists()

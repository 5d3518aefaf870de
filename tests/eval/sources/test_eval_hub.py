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

"""A generating run through the CLI emits no FutureWarning (issue 38: a former generator printed
``past_key_values is deprecated`` on every generating run). The run is a subprocess with
FutureWarnings turned into errors (``PYTHONWARNINGS=error::FutureWarning``): a deprecated call
made by our code, or made on its behalf by a library, fails the run instead of scrolling by."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from paths import TEST_DATA


def test_a_generating_run_emits_no_future_warning(tiny_model: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONWARNINGS": "error::FutureWarning", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(tiny_model), "--data", str(TEST_DATA / "build"),
                           "--tasks", "ls", "--limit", "3", "--batch-size", "2", "--max-new-tokens", "4", "--no-progress", "--output-dir", str(out)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FutureWarning" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text("utf-8"))["results"]["ls"]
    assert sorted(results) == ["p1", "p2"] and all(results[p]["n"] == 3 for p in results), results
    generated = [json.loads(line) for f in sorted((out / "samples").glob("ls*.jsonl")) for line in f.read_text("utf-8").splitlines() if line.strip()]
    assert len(generated) == 6  # 3 records x 2 prompts, each generated under the warnings filter

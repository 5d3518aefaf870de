"""bench/hf_vs_lmeval.py (issue 48) end to end on the tiny model: one pair of each side per row."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lm_eval", reason="lm-evaluation-harness (lm-eval==0.4.13, extra 'all') is not installed")
pytest.importorskip("accelerate", reason="lm-eval's hf model needs accelerate (extra 'all')")

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"(\d+(?:\.\d+)?)"
FIELDS = ("wall", "user", "sys", "peak", "minflt")


def test_one_pair_per_row_prints_both_sides_their_ratios_and_the_same_answers(tiny_model: Path, tmp_path: Path) -> None:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "hf_vs_lmeval.py"), "--model", str(tiny_model), "--rows", "mc-0-default,gen-1-1",
                           "--shots", "1", "--pairs", "1", "--limit", "2", "--mc-tasks", "wic,faq", "--prompts", "p1", "--max-new-tokens", "4"],
                          capture_output=True, text=True, env=env, timeout=3600)  # a hang, not a speed limit: minutes on a loaded machine
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert re.search(r"^bench/hf_vs_lmeval\.py \| model .* \| limit 2 \| batch size 8 \|", out, re.M)
    for row in ("mc-0-default", "gen-1-1"):
        for side in ("ours hf", "lm-eval HF"):
            line = re.search(rf"^row {row} +{side} +\| " + " \\| ".join(rf"{f} {NUMBER}(?: s| MiB)?" for f in FIELDS) + "$", out, re.M)
            assert line, (row, side, out)
            wall, user, sys_, peak, minflt = map(float, line.groups())
            assert wall > 0 and user > 0 and peak > 100 and minflt > 1000  # a whole Python process with torch: > 100 MiB
        ratio = re.search(rf"^row {row} +lm-eval / ours: " + ", ".join(rf"{f} {NUMBER}x" for f in FIELDS)
                          + r" \| same answers (\d+)/(\d+) \(max \|dLL\| (\S+)\) \| 1 pairs \| load", out, re.M)
        assert ratio, (row, out)
        same, total = int(ratio[6]), int(ratio[7])
        # wic and faq p1 over 2 documents; ner_adg p1 over 2 documents: every answer alike on the same model
        assert (same, total) == ((4, 4) if row.startswith("mc") else (2, 2))
        assert float(ratio[8]) < 1e-3
    assert re.search(r"^whole command \d+ s$", out, re.M)

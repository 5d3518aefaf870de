"""A quick double Ctrl-C on `evalita-eval run`, through the real CLI in a subprocess: the first says exactly what the
resume cache holds (counted from the file, not from a counter a signal can cut short), the second, during the
shutdown, is quiet (no traceback) and the exit code stays 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from evalita_eval.running.cache import RequestCache
from paths import TEST_DATA

# Ctrl-C as in a terminal (a test run in the background starts with SIGINT ignored), and each log-likelihood call
# paced so that the first Ctrl-C lands while the run computes, whatever the machine's speed.
LAUNCHER = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from evalita_eval.backends.hf import HFBackend

real = HFBackend.loglikelihood

def paced(self, requests):
    out = real(self, requests)
    time.sleep(0.2)
    return out

HFBackend.loglikelihood = paced
from evalita_eval.cli import main
main()
"""


def test_a_double_ctrl_c_is_quiet_and_counts_what_the_cache_holds(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    cache = out / "cache.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, "run", "--model", str(tiny_model), "--data", str(TEST_DATA / "build"),
                             "--tasks", "wic,te", "--batch-size", "2", "--device", "cpu", "--no-progress", "--output-dir", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None and (cache.read_text("utf-8").count("\n") if cache.is_file() else 0) < 4:
        time.sleep(0.01)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    os.kill(proc.pid, signal.SIGINT)
    said = []
    for line in proc.stderr:  # the second Ctrl-C as soon as the first one's summary is out: the shutdown
        said.append(line)
        if line.startswith("interrupted: "):
            os.kill(proc.pid, signal.SIGINT)
            break
    said += proc.stderr.readlines()
    assert proc.wait() == 130
    stderr = "".join(said)
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr[-3000:]
    kept = len(RequestCache(cache))
    assert kept >= 4 and kept == cache.read_text("utf-8").count("\n")
    (line,) = [line for line in said if line.startswith("interrupted: ")]
    assert line.startswith(f"interrupted: {kept} log-likelihoods of this run were saved in {cache} (0 from earlier runs); "), line

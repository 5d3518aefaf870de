"""`evalita-eval sweep`: two tiny models x two settings -> four run folders and one report; a failed run
is reported while the others go on, and the rerun computes only the unfinished run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalita_eval.sweep import load_sweep

from paths import TEST_DATA

pytest.importorskip("ray")
DATA = TEST_DATA / "build"


@pytest.fixture(scope="module")
def two_models(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    from evalita_eval.tiny import build_tiny_model

    return [build_tiny_model(tmp_path_factory.mktemp(f"tiny{seed}"), seed=seed) for seed in (0, 1)]


def _sweep_file(path: Path, models: list[Path], out: Path, bad_limit: bool) -> Path:
    runs = [{"model": str(m), "setting": s, "output_dir": str(out / f"m{i}-{s}"), **({"limit": 0} if bad_limit and (i, s) == (1, "ce") else {})}
            for i, m in enumerate(models) for s in ("loglikelihood", "ce")]
    doc = {"defaults": {"data": str(DATA), "tasks": "te", "limit": 2, "batch_size": 2, "max_new_tokens": 2, "backend_args": {"gguf_file": "none"}},
           "runs": runs}
    path.write_text(json.dumps(doc), "utf-8")
    return path


def _sweep(file: Path, report: Path) -> subprocess.CompletedProcess:
    # Ray saves its login token under the home folder: a temporary one, so the test leaves nothing in ~.
    env = {**os.environ, "HOME": str(report.parent / "home")}
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", "sweep", str(file), "--out", str(report)], capture_output=True, text=True, env=env)


def test_sweep_four_runs_one_report_and_resume(two_models: list[Path], tmp_path: Path) -> None:
    out, report = tmp_path / "runs", tmp_path / "report"
    first = _sweep(_sweep_file(tmp_path / "sweep.json", two_models, out, bad_limit=True), report)
    assert first.returncode == 1 and "1 of 4 runs failed" in first.stderr, first.stdout + first.stderr
    assert "m1-ce: failed (exit 2)" in first.stdout  # reported; the three others went on
    done = {p.name: json.loads((p / "results.json").read_text("utf-8")) for p in sorted(out.iterdir()) if (p / "results.json").is_file()}
    assert sorted(done) == ["m0-ce", "m0-loglikelihood", "m1-loglikelihood"] and all(d["status"] == "complete" for d in done.values())
    assert done["m0-ce"]["config"]["setting"] == "ce" and done["m0-ce"]["results"]["te"]["p1"]["n"] == 2
    stamps = {name: (out / name / "results.json").stat().st_mtime_ns for name in done}
    second = _sweep(_sweep_file(tmp_path / "sweep.json", two_models, out, bad_limit=False), report)
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.count("already complete") == 3 and "m1-ce: complete" in second.stdout
    assert {name: (out / name / "results.json").stat().st_mtime_ns for name in done} == stamps  # not run again
    last = json.loads((out / "m1-ce" / "results.json").read_text("utf-8"))
    assert last["status"] == "complete" and last["config"]["setting"] == "ce" and last["model"]["name_or_path"] == str(two_models[1])
    assert "report of 4 runs" in second.stdout and (report / "report.md").is_file()
    assert json.loads((report / "report.json").read_text("utf-8"))  # one report of all four


def test_sweep_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {setting: ce}\n", "utf-8")
    with pytest.raises(ValueError, match=r"bad.yaml: run 1 is not a mapping with a model"):
        load_sweep(bad)
    twice = tmp_path / "twice.yaml"
    twice.write_text("- {model: org/a}\n- {model: org/a}\n", "utf-8")
    with pytest.raises(ValueError, match=r"two runs write to results/org__a/loglikelihood;"):
        load_sweep(twice)
    ok = tmp_path / "ok.yaml"
    ok.write_text("defaults: {backend: vllm, backend_args: {tensor_parallel_size: 4, data_parallel_size: 2}}\nruns:\n- {model: org/a, num_fewshot: 5}\n", "utf-8")
    (run,) = load_sweep(ok)
    assert run.gpus == 8.0 and run.output_dir == Path("results/org__a/loglikelihood-5shot")
    assert run.argv == ("--backend", "vllm", "--model", "org/a", "--num-fewshot", "5", "--backend-arg", "tensor_parallel_size=4",
                        "--backend-arg", "data_parallel_size=2", "--output-dir", "results/org__a/loglikelihood-5shot")

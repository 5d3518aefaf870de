"""`evalita-data push --layout official` read back by `evalita-eval run --data hf:ORG` (the Hub
stub) and `--data hf:FOLDER` (the `--to-dir` copy): the same records, the same scores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub")

from evalita_data.hub.benchmark import BenchmarkFileError, benchmark_task_ids  # noqa: E402
from publish_fixtures import hub, hub_env, run_cli, sample_build  # noqa: E402,F401 - fixtures

ENTRIES = "faq,ner_wn,sum"
ARGS = ["--tasks", ENTRIES, "--prompts", "p1", "--limit", "2", "--num-fewshot", "1", "--max-new-tokens", "3"]


def run_eval(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", *args], env=env, capture_output=True, text=True)


def test_official_push_reads_back_from_the_hub_and_from_the_folder(sample_build: Path, hub, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    env = hub_env(hub, tmp_path / "hf")
    pushed = run_cli(["push", "--build", str(sample_build), "--org", "mirror", "--layout", "official",
                      "--task", "faq", "--task", "ner", "--task", "sum", "--task", "rel"], env)
    assert pushed.returncode == 0, pushed.stderr
    assert "missing: mirror/summarization-fp [default]: no split dev: the official dev split is not documented" in pushed.stdout
    assert "missing: mirror/relation_extraction [default]: no split test: our test split is not in the build" in pushed.stdout
    folder = tmp_path / "official"
    written = run_cli(["push", "--build", str(sample_build), "--org", "mirror", "--layout", "official", "--to-dir", str(folder),
                       "--task", "faq", "--task", "ner", "--task", "sum", "--task", "rel"], env)
    assert written.returncode == 0, written.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["entity_recognition", "faq", "relation_extraction", "summarization-fp"]
    with hub.state.lock:
        shas = {repo_id: repo.branches["main"] for repo_id, repo in hub.state.repos.items()}
    results = {}
    for name, data in (("hub", "hf:mirror"), ("folder", f"hf:{folder}")):
        out = tmp_path / name
        proc = run_eval(["--model", str(tiny_model), "--data", data, *ARGS, "--output-dir", str(out)], env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        results[name] = json.loads((out / "results.json").read_text("utf-8"))
    hub_run, folder_run = results["hub"], results["folder"]
    assert sorted(hub_run["results"]) == ["faq", "ner_wn", "sum"]
    assert hub_run["results"] == folder_run["results"]
    assert hub_run["data"]["manifest_sha256"] == folder_run["data"]["manifest_sha256"]
    assert set(hub_run["data"]["manifest_sha256"]["sum"]) == {"test", "train"}  # SUM's few-shot: our train, no dev
    assert hub_run["data"]["revisions"] == {r: shas[r] for r in ("mirror/faq", "mirror/entity_recognition", "mirror/summarization-fp")}
    assert folder_run["data"]["source"] == f"hf:{folder}"
    # no test split built: the official benchmark all the same (evalita_data/hub/official.py)
    assert benchmark_task_ids(folder / "relation_extraction") == ["rel", "rel_p1", "rel_p2"]
    # The eval.yaml pushed is the --to-dir one, byte for byte.
    with hub.state.lock:
        repo = hub.state.repos["mirror/faq"]
        files = repo.resolve("main").files
    assert files["eval.yaml"].data == (folder / "faq" / "eval.yaml").read_bytes()
    assert files["data/default/test_1-00000-of-00001.parquet"].data == (folder / "faq" / "data" / "default" / "test_1-00000-of-00001.parquet").read_bytes()


def test_a_relative_folder_is_read_as_the_absolute_one_never_from_the_hub(sample_build: Path, tmp_path: Path) -> None:  # noqa: F811
    """Issue 47: `--data hf:./official` lacking a dataset folder looked `official/entity_recognition` up on the Hub."""
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HOME": str(tmp_path / "hf")}  # nothing listens there
    written = run_cli(["push", "--build", str(sample_build), "--layout", "official", "--to-dir", str(tmp_path / "official"),
                       "--task", "faq"], env)
    assert written.returncode == 0, written.stderr
    errors = {}
    for data in ("hf:./official", f"hf:{tmp_path}/official"):
        proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", "m", "--data", data, "--tasks", "ner_wn"],
                              env=env, capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 1 and "Hub" not in proc.stderr and "127.0.0.1" not in proc.stderr, proc.stderr
        errors[data] = proc.stderr.strip().splitlines()[-1]
    assert errors["hf:./official"] == errors[f"hf:{tmp_path}/official"]
    assert errors["hf:./official"].startswith(f"Error: ner_wn: cannot read {tmp_path}/official/entity_recognition config wn ")


def test_a_folder_that_is_not_one_is_refused_in_one_line(tiny_model: Path, tmp_path: Path) -> None:
    proc = run_eval(["--model", str(tiny_model), "--data", f"hf:{tmp_path}/none", "--output-dir", str(tmp_path / "run")], dict(os.environ))
    assert proc.returncode == 2
    assert f"hf:{tmp_path}/none: {tmp_path}/none is not a folder" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("text, error", [
    ("tasks: []\n", "tasks: expected a non-empty list"),
    ("name: x\n", "tasks: expected a non-empty list"),
    ("tasks:\n- id: wic\n  config: default\n", "tasks[0].split: expected a non-empty string, got None"),
    ("tasks:\n- id: wic\n  config: default\n  split: test\n- id: wic\n  config: default\n  split: test\n", "tasks[1].id: 'wic' appears twice"),
    ("tasks: [\n", "not a readable YAML file"),
])
def test_a_benchmark_file_that_is_not_one_is_refused_naming_the_key(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "eval.yaml"
    path.write_text(text, "utf-8")
    with pytest.raises(BenchmarkFileError) as err:
        benchmark_task_ids(tmp_path)
    assert str(err.value) == f"{path}: {error}" or str(err.value).startswith(f"{path}: {error}")
    assert "\n" not in str(err.value)

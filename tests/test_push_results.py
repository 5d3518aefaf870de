"""`evalita-eval push-results`: a run's results, samples and card as one Hub commit (loopback stub)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub")

from hub_stub import StoredFile  # noqa: E402
from publish_fixtures import TOKEN, hub, hub_env  # noqa: E402,F401 - fixture

RUN = Path(__file__).parent / "data" / "results" / "beta"


def push_results(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", "push-results", *args], env=env, capture_output=True, text=True)


def expected_files() -> dict[str, bytes]:
    files = {"beta-8b_v1/results.json": (RUN / "results.json").read_bytes()}
    files.update({f"beta-8b_v1/samples/{p.name}": p.read_bytes() for p in (RUN / "samples").glob("*.jsonl")})
    return files


def test_push_results_is_one_commit_that_never_deletes(hub, tmp_path: Path) -> None:  # noqa: F811
    model = json.loads((RUN / "results.json").read_text("utf-8"))["model"]
    assert (model["name_or_path"], model["revision"]) == ("org-b/beta-8b", "v1")
    env = hub_env(hub, tmp_path / "hf")
    dry = push_results([str(RUN), "--repo", "me/evalita-results", "--dry-run"], env)
    assert dry.returncode == 0, dry.stderr
    assert "me/evalita-results@main (new repository): would commit 14 of 14 file(s)" in dry.stdout
    assert "me/evalita-results" not in hub.state.repos

    proc = push_results([str(RUN), "--repo", "me/evalita-results"], env)
    assert proc.returncode == 0, proc.stderr
    assert TOKEN not in proc.stdout + proc.stderr
    repo = hub.repo("me/evalita-results")
    assert repo.user_commits() == 1
    files = hub.files("me/evalita-results")
    for path, data in expected_files().items():
        assert files[path] == data
    card = files["README.md"].decode("utf-8")
    assert "| te | acc | p1 65.00, p2 63.33, p3 51.67, p4 58.33, p5 65.00, p6 60.00 | 51.67 | 65.00 | 60.56 |" in card
    assert "| hs | f1_macro |" in card and "Sharpe" in card

    # a file someone else added stays; an unchanged run makes no commit
    head = repo.branches["main"]
    c = repo.commits[head]
    repo.commit("main", "foreign", {**c.files, "other-model/results.json": StoredFile(b"{}", False)})
    again = push_results([str(RUN), "--repo", "me/evalita-results"], env)
    assert again.returncode == 0, again.stderr
    assert "unchanged, no commit" in again.stdout and "other-model/results.json (not from this build; left alone)" in again.stdout
    assert repo.user_commits() == 2 and "other-model/results.json" in hub.files("me/evalita-results")


def test_push_results_to_dir_and_refusals(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "repo"
    proc = push_results([str(RUN), "--repo", "me/results", "--to-dir", str(out)], env)
    assert proc.returncode == 0, proc.stderr
    written = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert set(written) == set(expected_files()) | {"README.md"}
    bad = push_results([str(RUN), "--repo", "../x", "--to-dir", str(out)], env)
    assert bad.returncode == 1 and "expected ORG/NAME" in bad.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = push_results([str(empty), "--repo", "me/results", "--to-dir", str(out)], env)
    assert proc.returncode == 1 and "no results.json" in proc.stderr
    # no token: refused before any network call, with the hint
    shutil.rmtree(tmp_path / "hf", ignore_errors=True)
    proc = push_results([str(RUN), "--repo", "me/results"], {**env, "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert proc.returncode == 1 and "no Hub token" in proc.stderr

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
FOLDER = "org-b__beta-8b@v1/loglikelihood"  # <model>@<revision>/<setting>


def push_results(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", "push-results", *args], env=env, capture_output=True, text=True)


def expected_files() -> dict[str, bytes]:
    files = {f"{FOLDER}/results.json": (RUN / "results.json").read_bytes()}
    files.update({f"{FOLDER}/samples/{p.name}": p.read_bytes() for p in (RUN / "samples").glob("*.jsonl")})
    return files


def test_push_results_is_one_commit_that_never_deletes(hub, tmp_path: Path) -> None:  # noqa: F811
    model = json.loads((RUN / "results.json").read_text("utf-8"))["model"]
    assert (model["name_or_path"], model["revision"]) == ("org-b/beta-8b", "v1")
    env = hub_env(hub, tmp_path / "hf")
    dry = push_results([str(RUN), "--repo", "me/evalita-results", "--dry-run"], env)
    assert dry.returncode == 0, dry.stderr
    assert "me/evalita-results@main (new repository): would commit 15 of 15 file(s)" in dry.stdout
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
    assert "| te | acc | 60 | p1 65.00, p2 63.33, p3 51.67, p4 58.33, p5 65.00, p6 60.00 | 51.67 | 65.00 | 60.56 |" in card
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
    assert set(written) == set(expected_files()) | {"README.md", f"{FOLDER}/README.md"}
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


def _variant(tmp: Path, name: str, **config) -> Path:
    """A copy of the beta run with other config values (another setting of the same model)."""
    folder = tmp / name
    shutil.copytree(RUN, folder)
    doc = json.loads((folder / "results.json").read_text("utf-8"))
    doc["config"].update(config)
    (folder / "results.json").write_text(json.dumps(doc), "utf-8")
    return folder


def test_push_results_keeps_every_setting_of_a_model(tmp_path: Path) -> None:
    """A log-likelihood run and a CE run of one model pushed into one --to-dir: both stay, the card lists both."""
    env = {"PATH": "/usr/bin:/bin", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "repo"
    ce = _variant(tmp_path, "ce", setting="ce", constrained=True, apply_chat_template=True,
                  chat_template={"source": "tokenizer", "sha256": "ab" * 32}, system_instruction="Sei un esperto.")
    for run in (RUN, ce):
        proc = push_results([str(run), "--repo", "me/results", "--to-dir", str(out)], env)
        assert proc.returncode == 0, proc.stderr
    assert (out / FOLDER / "results.json").read_bytes() == (RUN / "results.json").read_bytes()
    assert (out / "org-b__beta-8b@v1/ce-constrained/results.json").read_bytes() == (ce / "results.json").read_bytes()
    card = (out / "README.md").read_text("utf-8")
    assert card.startswith("---\npretty_name: Evalita-LLM results\n")
    assert '- config_name: "org-b__beta-8b@v1--ce-constrained"\n  data_files: "org-b__beta-8b@v1/ce-constrained/results.json"' in card
    assert '- config_name: "org-b__beta-8b@v1--loglikelihood"' in card
    assert "# Evalita-LLM results: org-b/beta-8b\n" in card
    for row in ("| setting | ce constrained |", "| constrained | yes |", "| system instruction | Sei un esperto. |",
                f"| chat template | yes, sha256 {'ab' * 6} |", "| few-shot | 0 |", "| revision | v1 |", "| split | official |",
                "| n per prompt | 40–80 |", "| limit | all |"):
        assert row in card, row
    assert "- `org-b__beta-8b@v1/loglikelihood/` (card: `org-b__beta-8b@v1/loglikelihood/README.md`)" in card
    assert (out / FOLDER / "README.md").read_text("utf-8").count("| setting | loglikelihood |") == 1


def test_push_results_card_of_a_local_model_and_a_dev_split(tmp_path: Path) -> None:
    run = _variant(tmp_path, "dev", split="dev")
    doc = json.loads((run / "results.json").read_text("utf-8"))
    doc["model"] = {"name_or_path": str(tmp_path / "models" / "tiny"), "revision": None, "dtype": "float32", "backend": "hf"}
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    (run / "results.json").write_text(json.dumps(doc), "utf-8")
    out = tmp_path / "repo"
    proc = push_results([str(run), "--repo", "me/results", "--to-dir", str(out)], {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    card = (out / "README.md").read_text("utf-8")
    assert "# Evalita-LLM results: tiny (not comparable with the paper)\n" in card and str(tmp_path) not in card.split("\n## ")[0].split("| setting |")[0]
    assert "| revision | – (local folder) |" in card and "| split | dev (not comparable with the paper) |" in card
    assert (out / "tiny/loglikelihood-dev/results.json").is_file()


def test_eval_results_yaml_for_official_data(tmp_path: Path) -> None:
    from evalita_eval.publishing.push_results import results_repo

    run = _variant(tmp_path, "official")
    doc = json.loads((run / "results.json").read_text("utf-8"))
    doc["data"]["revisions"] = {"evalitahf/textual_entailment": "c0ffee"}
    (run / "results.json").write_text(json.dumps(doc), "utf-8")
    files = {f.path: f.data.decode("utf-8") for f in results_repo(run, "me/results", echo=lambda _m: None).files}
    te = files[f"{FOLDER}/.eval_results/te.yaml"]
    cps = "62.11"  # te acc of beta: MaxP 65.00, AvgP 60.556 -> (1 - (65.00 - 60.556) / 100) * 65.00
    assert te == ('- dataset:\n    id: "evalitahf/textual_entailment"\n    task_id: "te"\n    revision: "c0ffee"\n'
                  f'  value: {cps}\n  source:\n    url: "https://huggingface.co/datasets/me/results/tree/main/{FOLDER}"\n'
                  '    name: "evalita-eval results"\n  notes: "loglikelihood, 0-shot, CPS of acc over 6 prompts (evalita-eval)"\n')
    assert not any(".eval_results/hs" in p for p in files)  # no revision of an official hs copy: not written


def test_dry_run_without_the_hub_asks_once_and_lists_the_local_files(hub, tmp_path: Path) -> None:  # noqa: F811
    import socket

    with socket.socket() as s:  # a port nothing listens on: every connection is refused
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    env = {**hub_env(hub, tmp_path / "hf"), "HF_ENDPOINT": closed}
    dry = push_results([str(RUN), "--repo", "me/dry-run-only", "--dry-run"], env)
    assert dry.returncode == 0, dry.stderr
    assert "retrying" not in dry.stdout + dry.stderr  # one attempt, not the push's backoff
    assert "could not compare with the remote" in dry.stdout and "would send these 15 file(s)" in dry.stdout
    assert f"dry run without the Hub: the local files listed, none compared with {closed}; nothing sent" in dry.stdout
    # With the Hub reachable, the same dry run compares with it (the repository is new there).
    assert "(new repository)" in push_results([str(RUN), "--repo", "me/dry-run-only", "--dry-run"], hub_env(hub, tmp_path / "hf")).stdout

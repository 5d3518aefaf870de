"""`evalita-eval push-results`: a run's results, samples and card as one Hub commit (loopback stub)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub")

from paths import TEST_DATA
from hub_stub import StoredFile  # noqa: E402
from publish_fixtures import TOKEN, hub, hub_env, published_results, published_samples, repo_folder, sample_build  # noqa: E402,F401 - fixture

RUN = TEST_DATA / "results" / "beta"
FOLDER = repo_folder(RUN)  # <model>@<revision>/<setting>-<run id>


def push_results(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", "push-results", *args], env=env, capture_output=True, text=True)


def expected_files() -> dict[str, bytes]:
    files = {f"{FOLDER}/results.json": published_results(RUN)}
    files.update({f"{FOLDER}/samples/{name}": data for name, data in published_samples(RUN).items()})
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
    card = files[f"{FOLDER}/README.md"].decode("utf-8")
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
    assert (out / FOLDER / "results.json").read_bytes() == published_results(RUN)
    ce_folder = repo_folder(ce, setting="ce-constrained")
    assert (out / ce_folder / "results.json").read_bytes() == published_results(ce)
    front = (out / "README.md").read_text("utf-8")
    assert front.startswith("---\npretty_name: Evalita-LLM results\n")
    assert f'- config_name: "{ce_folder.replace("/", "--")}"\n  data_files: "{ce_folder}/results.json"' in front
    assert f'- config_name: "{FOLDER.replace("/", "--")}"' in front
    # the front page lists both runs, whichever was pushed last, with setting and status
    no_page = "no: data not read from the official Hub datasets (run --data hf:ORG): no dataset id and revision to name"
    assert (f"| [`{FOLDER}/`]({FOLDER}/README.md) | org-b/beta-8b@v1 | loglikelihood, 0-shot | official | all | "
            f"complete, 3 task(s) | {no_page} |") in front
    assert (f"| [`{ce_folder}/`]({ce_folder}/README.md) | org-b/beta-8b@v1 | "
            "ce constrained, 0-shot | official | all | complete, 3 task(s) |") in front
    card = (out / ce_folder / "README.md").read_text("utf-8")
    assert "# Evalita-LLM results: org-b/beta-8b@v1\n" in card
    for row in ("| setting | ce constrained |", "| constrained | yes |", "| system instruction | Sei un esperto. |",
                f"| chat template | yes, sha256 {'ab' * 6} |", "| few-shot | 0 |", "| revision | v1 |", "| split | official |",
                "| n per prompt | 40–80 |", "| limit | all |"):
        assert row in card, row
    assert "Other runs" not in card  # the front page lists them: no list here to go stale
    assert (out / FOLDER / "README.md").read_text("utf-8").count("| setting | loglikelihood |") == 1


def test_a_second_run_of_the_same_model_and_setting_is_kept_beside_the_first(tmp_path: Path) -> None:
    """Issue 47: two runs of one model and setting that differ in a number-changing option (the seed) each keep their
    folder, the front page lists both; pushing the first again changes nothing."""
    env = {"PATH": "/usr/bin:/bin", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    out = tmp_path / "repo"
    other = _variant(tmp_path, "seed7", seed=7)
    for run in (RUN, other, RUN):
        proc = push_results([str(run), "--repo", "me/results", "--to-dir", str(out)], env)
        assert proc.returncode == 0, proc.stderr
    folders = sorted(str(p.parent.relative_to(out)) for p in out.rglob("results.json"))
    assert folders == sorted([FOLDER, repo_folder(other)]) and FOLDER != repo_folder(other)
    assert (out / FOLDER / "results.json").read_bytes() == published_results(RUN)
    assert (out / repo_folder(other) / "results.json").read_bytes() == published_results(other)
    front = (out / "README.md").read_text("utf-8")
    assert front.count("| org-b/beta-8b@v1 | loglikelihood, 0-shot | official | all | complete, 3 task(s) |") == 2
    assert all(f"| [`{f}/`]({f}/README.md) |" in front for f in folders)


def test_push_results_card_of_a_local_model_and_a_dev_split(tmp_path: Path) -> None:
    run = _variant(tmp_path, "dev", split="dev")
    doc = json.loads((run / "results.json").read_text("utf-8"))
    doc["model"] = {"name_or_path": str(tmp_path / "models" / "tiny"), "revision": None, "dtype": "float32", "backend": "hf"}
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    (run / "results.json").write_text(json.dumps(doc), "utf-8")
    out = tmp_path / "repo"
    proc = push_results([str(run), "--repo", "me/results", "--to-dir", str(out)], {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    [folder] = (out / "tiny").glob("loglikelihood-dev-*")  # its id: of its published form (no local path in it)
    card = (out / folder / "README.md").read_text("utf-8")
    assert "# Evalita-LLM results: tiny (local folder) (not comparable with the paper)\n" in card
    assert not [p for p in out.rglob("*") if p.is_file() and str(tmp_path).encode() in p.read_bytes()]
    assert "| model page files | none: evaluated on split 'dev', not the official one |" in card
    assert "| revision | – (local folder) |" in card and "| split | dev (not comparable with the paper) |" in card
    assert (out / folder / "results.json").is_file()


OFFICIAL = {"evalitahf/textual_entailment": "c0ffee", "evalitahf/hatespeech_detection": "beef01", "evalitahf/entity_recognition": "d00d02"}
RUN_DAY = 1_780_000_000  # 2026-05-28 (UTC): the run's results.json written then


def _official(tmp: Path, name: str, **config) -> Path:
    run = _variant(tmp, name, **config)
    doc = json.loads((run / "results.json").read_text("utf-8"))
    doc["data"] = {"source": "hf:evalitahf", "manifest_sha256": doc["data"]["manifest_sha256"], "revisions": OFFICIAL}
    doc["results"]["ner_adg"] = doc["results"].pop("ner")  # a task of the benchmark's eval.yaml (model_page.BENCHMARK_TASK_IDS)
    (run / "results.json").write_text(json.dumps(doc), "utf-8")
    os.utime(run / "results.json", (RUN_DAY, RUN_DAY))
    return run


def test_model_page_files_only_for_a_complete_official_run(hub, tmp_path: Path) -> None:  # noqa: F811
    """A complete official run: one .eval_results file and one model-index per setting, n and date in the notes;
    a --limit run and a partial run: none, and the reason printed and on the front page."""
    env = hub_env(hub, tmp_path / "hf")
    full, ce = _official(tmp_path, "full"), _official(tmp_path, "ce", setting="ce")
    limited = _official(tmp_path, "limited", limit=4, num_fewshot=5)
    partial = _official(tmp_path, "partial", num_fewshot=1)
    doc = json.loads((partial / "results.json").read_text("utf-8"))
    doc.update(status="partial", tasks={"planned": ["te", "hs", "ner_adg", "faq"], "skipped": []})
    (partial / "results.json").write_text(json.dumps(doc), "utf-8")
    printed = {}
    for run in (full, ce, limited, partial):
        proc = push_results([str(run), "--repo", "me/model-page"], env)
        assert proc.returncode == 0, proc.stderr
        printed[run.name] = proc.stdout
    files = hub.files("me/model-page")
    pages = sorted(p for p in files if ".eval_results/" in p or p.endswith("model-index.yaml"))
    ce_folder, folder = repo_folder(ce, setting="ce"), repo_folder(full)
    ce_id, full_id = ce_folder.rsplit("-", 1)[1], folder.rsplit("-", 1)[1]
    assert pages == [f"{ce_folder}/.eval_results/evalita-llm_ce-{ce_id}.yaml", f"{ce_folder}/model-index.yaml",
                     f"{folder}/.eval_results/evalita-llm_loglikelihood-{full_id}.yaml", f"{folder}/model-index.yaml"]
    import yaml

    entries = yaml.safe_load(files[f"{folder}/.eval_results/evalita-llm_loglikelihood-{full_id}.yaml"])
    assert [(e["dataset"]["id"], e["dataset"]["task_id"], e["dataset"]["revision"]) for e in entries] == [
        ("evalitahf/textual_entailment", "te", "c0ffee"), ("evalitahf/hatespeech_detection", "hs", "beef01"),
        ("evalitahf/entity_recognition", "ner_adg", "d00d02")]
    te = entries[0]
    assert te["value"] == 62.11  # te acc of beta: MaxP 65.00, AvgP 60.556 -> (1 - (65.00 - 60.556) / 100) * 65.00
    assert te["date"] == "2026-05-28"
    assert te["notes"] == ("Evalita-LLM loglikelihood, 0-shot: CPS (combined performance score) of acc over 6 prompts, "
                           "n=60 items per prompt, complete run on the official split (default/test), evaluated 2026-05-28 (evalita-eval)")
    assert "n=80 items per prompt" in entries[1]["notes"] and "of f1_macro over" in entries[1]["notes"]
    index = yaml.safe_load(files[f"{folder}/model-index.yaml"])["model-index"]
    assert index[0]["name"] == "org-b/beta-8b"  # the model's id, as the Hub wants it
    assert [(r["dataset"]["type"], r["metrics"][0]["type"], r["metrics"][0]["value"]) for r in index[0]["results"]][0] == (
        "evalitahf/textual_entailment", "cps", 62.11)
    assert "no .eval_results" not in printed["full"]
    assert (f"note: no .eval_results or model-index.yaml for {repo_folder(limited, setting='loglikelihood-5shot')}: run with --limit 4: "
            "a score on the first items, not on the test set") in printed["limited"]
    assert "partial run: 3 of 4 tasks finished: a model page carries complete runs only" in printed["partial"]
    front = files["README.md"].decode("utf-8")
    assert front.count("| [`org-b__beta-8b@v1/") == 4  # every run pushed, whichever came last
    assert ("| loglikelihood, 5-shot | official | 4 | complete, 3 task(s) | no: run with --limit 4: a score on the first "
            "items, not on the test set |") in front
    assert "| partial run: 3 of 4 tasks finished, 3 task(s) | no: partial run" in front
    assert "| loglikelihood, 0-shot | official | all | complete, 3 task(s) | yes (.eval_results, model-index.yaml) |" in front


def test_a_run_made_under_a_temporary_folder_publishes_no_path_of_it(hub, sample_build: Path, tiny_model: Path,  # noqa: F811
                                                                     tmp_path: Path) -> None:
    """A real run of a local model on local data, pushed to the Hub stub: the temporary folder's path is in no file."""
    work = tmp_path / "machine-local-work"
    shutil.copytree(tiny_model, work / "my-model")
    shutil.copytree(sample_build, work / "data")
    env = hub_env(hub, tmp_path / "hf")
    run = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(work / "my-model"), "--data",
                          str(work / "data"), "--dtype", "float32", "--tasks", "te,faq", "--limit", "2",
                          "--output-dir", str(work / "out")], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    written = (work / "out" / "results.json").read_text("utf-8")
    assert str(work) in written  # the run itself records where it ran; publishing must not
    proc = push_results([str(work / "out"), "--repo", "me/local-run"], env)
    assert proc.returncode == 0, proc.stderr
    files = hub.files("me/local-run")
    sha = json.loads(written)["model"]["files_sha256"]
    name = f"my-model-{sha[:8]}"  # the folder's name and its weights' fingerprint (naming.display_name)
    assert {p.split("/")[0] for p in files if "/" in p} == {name}
    assert len([p for p in files if "/samples/" in p]) == 12
    leaks = [p for p, data in files.items() if str(tmp_path).encode() in data or b"machine-local-work" in data]
    assert leaks == []
    # the repository folder: the run id its published identity hashes to (no local path in it), which it carries
    [path] = [p for p in files if p.startswith(f"{name}/loglikelihood-") and p.endswith("/results.json")]
    published = json.loads(files[path])
    assert path == f"{name}/loglikelihood-{published['run_id']}/results.json" and published["run_id"] != json.loads(written)["run_id"]
    assert (published["model"]["name_or_path"], published["model"]["name"], published["model"]["local_folder"],
            published["model"]["files_sha256"]) == (name, name, True, sha)
    assert (published["data"]["source"], published["data"]["local_folder"]) == ("data", True)
    card = files[path.replace("results.json", "README.md")].decode("utf-8")
    assert f"| model | {name} (local folder) |" in card and "| data | data (local folder) |" in card


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


def test_public_names_replace_local_paths_only(tmp_path: Path, monkeypatch) -> None:
    from evalita_eval.publishing.public import local_replacements, public_record
    from evalita_eval.record import parse_record

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mdl").mkdir()
    doc = {"model": {"name_or_path": "./mdl", "tokenizer": str(tmp_path / "mdl"), "revision": None, "options": {"gguf_file": "/"}},
           "data": {"source": "/"}, "versions": {"evalita-llm": "0.1.0"}, "skipped": {"te": f"no split in {tmp_path}/mdl/x."},
           "config": {}, "results": {"te": {"p1": {"acc": 0.5, "n": 2}}}}  # a version-0 record (the reader's migration)
    run = parse_record(tmp_path / "results.json", doc, samples=False)
    assert local_replacements(run, Path(".")) == {str(tmp_path / "mdl"): "mdl", "./mdl": "mdl", str(tmp_path): tmp_path.name}
    public = public_record(run, None, Path("."))[0].to_json()
    assert public["model"] == {"name_or_path": "mdl", "name": "mdl", "revision": None, "dtype": None, "backend": None,
                               "tokenizer": "mdl", "options": {"gguf_file": "/"}, "local_folder": True}
    assert public["versions"] == {"evalita-llm": "0.1.0"} and public["skipped"] == {"te": "no split in mdl/x."}
    assert public["data"] == {"source": "/", "manifest_sha256": {}, "revisions": {}}  # a bare root is never replaced


def test_a_hub_organisation_is_published_as_named_never_as_a_local_folder(tmp_path: Path) -> None:
    """--hub-org ORG (hf://ORG) and --data hf:ORG: the data source stays the organisation (it was once published as
    'ORG', a local folder); hf:PATH, the official layout in a local folder, loses its path."""
    from evalita_eval.publishing.public import public_record
    from evalita_eval.record import parse_record

    for source, published in (("hf://myorg", "hf://myorg"), ("hf:evalitahf", "hf:evalitahf"),
                              (f"hf:{tmp_path}/hub", "hf:hub")):
        doc = {"model": {"name_or_path": "org/m", "revision": None}, "data": {"source": source}, "config": {},
               "results": {"te": {"p1": {"acc": 0.5, "n": 2}}}}
        run = parse_record(tmp_path / "results.json", doc, samples=False)
        assert public_record(run)[0].to_json()["data"] == {"source": published, "manifest_sha256": {}, "revisions": {}}


def test_a_local_path_a_plugin_backend_resolved_is_published_by_its_name(tmp_path: Path) -> None:
    from evalita_eval.publishing.public import public_record
    from evalita_eval.record import parse_record

    weights = "/home/someone/private/q8/weights.bin"
    doc = {"model": {"name_or_path": "org/m", "revision": None, "resolved": {"weights": weights, "bits": 8}},
           "data": {"source": "org/data"}, "versions": {"evalita-llm": "0.1.0"}, "config": {},
           "results": {"te": {"p1": {"acc": 0.5, "n": 2}}}}
    run = parse_record(tmp_path / "results.json", doc, samples=False)
    assert public_record(run, None, None)[0].to_json()["model"]["resolved"] == {"weights": "weights.bin", "bits": 8}

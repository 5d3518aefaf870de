"""evalita-data push end to end: real huggingface_hub and datasets clients against tests/hub_stub.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("datasets")
huggingface_hub = pytest.importorskip("huggingface_hub")

from evalita_data.hub.layout import BuildRefused, task_repo  # noqa: E402
from evalita_data.manifest import MANIFEST_FILE, BuiltTask  # noqa: E402
from evalita_data.hub.push import PushError, push  # noqa: E402
from evalita_data.registry import get_task  # noqa: E402
from hub_stub import StoredFile  # noqa: E402
from publish_fixtures import (  # noqa: E402,F401 - fixtures
    NER_RECORDS, TOKEN, built_tasks, make_ner_build, hub, hub_env, read_rows, run_cli, sample_build, shrink_split,
)

# Loads every config/split of the given repositories from HF_ENDPOINT and dumps rows and features.
LOAD_SCRIPT = """
import json, sys
import datasets
out = {}
for repo, config in json.loads(sys.argv[1]):
    ds = datasets.load_dataset(repo, config)
    for split in ds:
        out[f"{repo}|{config}|{split}"] = {"rows": ds[split].to_list(), "features": ds[split].features.to_dict()}
json.dump(out, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
"""


def _load_from_hub(hub, wanted, tmp_path) -> dict:
    """{"repo|config|split": {"rows", "features"}} as datasets.load_dataset gets them from the stub."""
    dump = tmp_path / "loaded.json"
    loaded = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, json.dumps(wanted), str(dump)],
                            env=hub_env(hub, tmp_path / "hf"), capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    return json.loads(dump.read_text("utf-8"))


def _manifest(build_dir):
    return json.loads((build_dir / MANIFEST_FILE).read_text("utf-8"))


def _posts(hub):
    return [(m, p) for m, p, _ in hub.state.requests if m in ("POST", "PUT")]


def _api(hub, monkeypatch):
    # Module constants, read at import: the env of this process cannot change them any more.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    return huggingface_hub.HfApi(endpoint=hub.url, token=TOKEN)


def test_push_then_load_dataset_from_the_hub(sample_build, hub, tmp_path):
    env = hub_env(hub, tmp_path / "hf")
    args = ["push", "--build", str(sample_build), "--org", "evalita-llm"]
    tasks = built_tasks(sample_build)

    dry = run_cli(args + ["--dry-run"], env)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("(new repository): would commit") == len(tasks)
    assert "  new " in dry.stdout and "data/train.parquet" in dry.stdout
    assert hub.state.repos == {} and _posts(hub) == []  # a dry run only reads

    first = run_cli(args, env)
    assert first.returncode == 0, first.stderr
    for task in tasks:
        repo_id = f"evalita-llm/{task}"
        assert hub.repo(repo_id).user_commits() == 1  # one commit per repository
        entry = _manifest(sample_build)["tasks"][task]
        expected = {f.path: f.data for f in task_repo(sample_build, task, BuiltTask.from_json(entry, "manifest")).files}
        remote = hub.files(repo_id)
        assert remote.pop(".gitattributes")  # put there by the Hub when it created the repository
        assert remote == expected
    # The token authenticated every write and was never printed.
    assert {auth for m, p, auth in hub.state.requests if m == "POST"} == {f"Bearer {TOKEN}"}
    for out in (dry.stdout, dry.stderr, first.stdout, first.stderr):
        assert TOKEN not in out

    # Pushing the unchanged build again: no upload, no commit, and it says so.
    posts_before = len(_posts(hub))
    second = run_cli(args, env)
    assert second.returncode == 0, second.stderr
    assert second.stdout.count(": unchanged, no commit") == len(tasks)
    assert [hub.repo(f"evalita-llm/{t}").user_commits() for t in tasks] == [1] * len(tasks)
    assert len(_posts(hub)) == posts_before

    # datasets.load_dataset from the endpoint returns the build's rows exactly.
    wanted = [[f"evalita-llm/{t}", c] for t in tasks for c in (get_task(t).configs or [None])]
    result = _load_from_hub(hub, wanted, tmp_path)
    manifest = _manifest(sample_build)
    expected_keys = set()
    for task in tasks:
        for key, split in manifest["tasks"][task]["splits"].items():
            config, _, name = key.rpartition("/")
            dkey = f"evalita-llm/{task}|{config or None}|{name}"
            expected_keys.add(dkey)
            assert result[dkey]["rows"] == read_rows(sample_build / task / split["file"]), dkey
    assert set(result) == expected_keys
    assert result["evalita-llm/wic|None|train"]["features"]["label"] == {"dtype": "int64", "_type": "Value"}


def test_changed_split_is_one_commit_of_changed_files_and_foreign_files_stay(sample_build, hub, tmp_path, monkeypatch):
    api = _api(hub, monkeypatch)
    build_dir = tmp_path / "build"
    shutil.copytree(sample_build, build_dir)
    push(build_dir, org="edit-org", tasks=["wic"], api=api, echo=lambda _m: None)
    repo = hub.repo("edit-org/wic")
    # Someone else adds a file to the repository: push must never remove it.
    head = repo.commits[repo.branches["main"]]
    repo.commit("main", "notes by a maintainer", {**head.files, "NOTES.md": StoredFile(b"hand-written\n", False)})
    before = hub.files("edit-org/wic")

    shrink_split(build_dir, "wic", "dev")
    lines: list[str] = []
    plans = push(build_dir, org="edit-org", tasks=["wic"], api=api, echo=lines.append)
    status = {c.path: c.status for c in plans[0].changes}
    assert status == {"README.md": "changed", "manifest.json": "changed", "data/dev.parquet": "changed",
                      "data/train.parquet": "unchanged", "data/test.parquet": "unchanged", "eval.yaml": "unchanged"}
    assert repo.user_commits() == 3  # ours, the maintainer's, ours
    after = hub.files("edit-org/wic")
    assert after["NOTES.md"] == b"hand-written\n"
    assert after["data/train.parquet"] == before["data/train.parquet"]
    assert after["data/dev.parquet"] != before["data/dev.parquet"]
    assert any("NOTES.md (not from this build; left alone)" in line for line in lines)
    assert "| dev | 29 | 500 | `data/dev.parquet` |" in after["README.md"].decode()


def test_network_errors_are_retried_then_a_failed_push_leaves_the_remote_as_it_was(sample_build, hub, tmp_path, monkeypatch):
    api = _api(hub, monkeypatch)
    build_dir = tmp_path / "build"
    shutil.copytree(sample_build, build_dir)
    lines: list[str] = []
    hub.state.fail_next["commit"] = (2, 503)
    push(build_dir, org="retry-org", tasks=["hs"], api=api, delays=(0, 0, 0), echo=lines.append)
    assert sum("retrying" in line for line in lines) == 2
    repo = hub.repo("retry-org/hs")
    assert repo.user_commits() == 1
    before = hub.files("retry-org/hs")

    shrink_split(build_dir, "hs", "dev")
    hub.state.fail_next["commit"] = (10, 502)
    with pytest.raises(PushError, match=r"retry-org/hs: commit: failed after 4 attempts .*left as it was"):
        push(build_dir, org="retry-org", tasks=["hs"], api=api, delays=(0, 0, 0), echo=lambda _m: None)
    hub.state.fail_next.clear()
    assert repo.user_commits() == 1 and hub.files("retry-org/hs") == before


def test_invalid_build_is_refused_before_any_network_call(sample_build, hub, tmp_path, monkeypatch):
    broken = tmp_path / "broken"
    shutil.copytree(sample_build, broken)
    path = broken / "sa" / "train.jsonl"
    path.write_text(path.read_text("utf-8") + '{"idtwitter": "1"}\n', "utf-8")
    requests_before = len(hub.state.requests)
    result = run_cli(["push", "--build", str(broken), "--org", "bad-org"], hub_env(hub, tmp_path / "hf"))
    assert result.returncode == 1
    assert "validation problem(s); nothing published" in result.stderr
    assert "train.jsonl:51:" in result.stderr
    with pytest.raises(BuildRefused):
        push(broken, org="bad-org", api=_api(hub, monkeypatch), echo=lambda _m: None)
    assert len(hub.state.requests) == requests_before


def test_missing_token_and_refused_commit_give_clear_errors_without_the_token(sample_build, hub, tmp_path):
    no_token = run_cli(["push", "--build", str(sample_build), "--org", "tokless", "--task", "hs"],
                       hub_env(hub, tmp_path / "empty-home", token=None))
    assert no_token.returncode == 1
    assert "no Hub token: set HF_TOKEN" in no_token.stderr
    assert "tokless/hs" not in hub.state.repos

    hub.state.fail_next["commit"] = (1, 403)
    refused = run_cli(["push", "--build", str(sample_build), "--org", "forbidden", "--task", "hs"], hub_env(hub, tmp_path / "hf"))
    hub.state.fail_next.clear()
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: ") and "403" in refused.stderr
    assert TOKEN not in refused.stdout + refused.stderr
    assert hub.repo("forbidden/hs").user_commits() == 0


def test_private_repository_on_a_new_branch(sample_build, hub, tmp_path):
    result = run_cli(["push", "--build", str(sample_build), "--org", "priv", "--task", "hs", "--private",
                      "--revision", "v0.1", "--message", "first release", "--jsonl"], hub_env(hub, tmp_path / "hf"))
    assert result.returncode == 0, result.stderr
    repo = hub.repo("priv/hs")
    assert repo.private
    assert repo.commits[repo.branches["v0.1"]].summary == "first release"
    assert set(hub.files("priv/hs", "v0.1")) == {".gitattributes", "README.md", "manifest.json", "data/dev.parquet", "jsonl/dev.jsonl"}
    assert set(hub.files("priv/hs", "main")) == {".gitattributes"}  # main untouched


def test_unreachable_hub_ends_in_a_clear_message(sample_build, monkeypatch):
    import socket

    with socket.socket() as s:  # a loopback port that nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    api = huggingface_hub.HfApi(endpoint=f"http://127.0.0.1:{port}", token=TOKEN)
    waits: list[float] = []
    monkeypatch.setattr("evalita_data.hub.push.time.sleep", waits.append)
    with pytest.raises(PushError, match=rf"http://127.0.0.1:{port}/datasets/evalita-llm/hs: read: failed after 3 attempts \(ConnectError"):
        push(sample_build, tasks=["hs"], api=api, delays=(0.5, 1.0), echo=lambda _m: None)
    assert waits == [0.5, 1.0]


def test_with_retries_retries_only_network_errors():
    from evalita_data.hub.push import with_retries

    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("connection reset")
        return "done"

    assert with_retries("x", flaky, delays=(0, 0, 0), sleep=lambda _s: None) == "done" and len(calls) == 3
    with pytest.raises(ValueError):
        with_retries("x", lambda: (_ for _ in ()).throw(ValueError("bad")), delays=(0,), sleep=lambda _s: None)


def test_ner_configs_load_from_the_hub(hub, tmp_path, monkeypatch):
    build_dir = make_ner_build(tmp_path / "build")
    push(build_dir, org="ner-org", api=_api(hub, monkeypatch), echo=lambda _m: None)
    result = _load_from_hub(hub, [["ner-org/ner", domain] for domain in NER_RECORDS], tmp_path)
    assert {k: v["rows"] for k, v in result.items()} == {
        f"ner-org/ner|{domain}|{split}": rows for domain, by_split in NER_RECORDS.items() for split, rows in by_split.items()}

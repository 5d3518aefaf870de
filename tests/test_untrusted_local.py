"""Untrusted local input (issue 22, findings 9-12): a damaged resume cache, a Hub-layout folder
without manifest, a --to-dir that symlinks outside itself, offline messages, the build output folder."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
from pathlib import Path

import pytest
from paths import TESTS
from publish_fixtures import built_tasks, run_cli, sample_build  # noqa: F401 - a fixture
from click.testing import CliRunner

from evalita_data.registry import get_task
from evalita_eval.running.cache import RequestCache, request_key
from evalita_eval.cli import main as eval_main

HERE = TESTS
DATA = HERE / "data" / "build"


# ---------------------------------------------------------------- 9: the resume cache


def _write_lines(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


def test_cache_damaged_lines_and_wrong_shapes_are_missing(tmp_path: Path) -> None:
    ll, gen = request_key("m", "loglikelihood", "a"), request_key("m", "generate_until", "b")
    good = [json.dumps({"key": ll, "value": [-1.5, True]}).encode(), json.dumps({"key": gen, "value": "ciao"}).encode()]
    path = tmp_path / "cache.jsonl"
    damaged = [b'{"key": "k1", "value": "\xff\xfe"}', b'{"key": "k2", "val', b"[1, 2]", b'{"key": 3, "value": "x"}',
               b'{"key": "k5", "value": null}']
    _write_lines(path, [good[0], *damaged, good[1]])
    cache = RequestCache(path)
    assert cache.damaged_lines == 5
    assert cache.get(ll, "loglikelihood") == [-1.5, True] and cache.get(gen, "generate_until") == "ciao"
    assert cache.damage_note() == f"{path}: 5 damaged lines ignored; those requests are computed again"

    shapes = {
        "nan": [float("nan"), True], "inf": [float("-inf"), False], "str-logprob": ["-1.0", True], "bool-logprob": [True, True],
        "int-greedy": [-1.0, 1], "short": [-1.0], "long": [-1.0, True, 0], "dict": {"logprob": -1.0}, "text": "ciao",
    }
    lines = [json.dumps({"key": request_key("m", "loglikelihood", name), "value": value}).encode() for name, value in shapes.items()]
    lines += [json.dumps({"key": request_key("m", "generate_until", name), "value": value}).encode()
              for name, value in {"list": ["a"], "number": 1.0, "true": True}.items()]
    _write_lines(path, lines)
    cache = RequestCache(path)
    assert cache.damaged_lines == 0 and len(cache) == 12
    assert [cache.get(request_key("m", "loglikelihood", name), "loglikelihood") for name in shapes] == [None] * 9
    assert [cache.get(request_key("m", "generate_until", n), "generate_until") for n in ("list", "number", "true")] == [None] * 3
    assert cache.get(request_key("m", "generate_until", "list"), "generate_until") is None  # counted once per key
    assert cache.wrong_shape == 12
    assert cache.damage_note() == f"{path}: 12 values of the wrong shape ignored; those requests are computed again"
    cache.add([(request_key("m", "generate_until", "list"), "ok")])
    assert cache.get(request_key("m", "generate_until", "list"), "generate_until") == "ok"
    cache.close()


def _computed(output: str) -> int:
    return int(output.split(" requests computed")[0].rsplit("\n", 1)[-1])


def test_damaged_cache_is_recomputed_with_equal_scores(tiny_model: Path, tmp_path: Path) -> None:
    args = ["run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "te,ner_adg", "--prompts", "p1",
            "--limit", "2", "--max-new-tokens", "4", "--output-dir"]
    first = CliRunner().invoke(eval_main, [*args, str(tmp_path / "a")], catch_exceptions=False)
    assert first.exit_code == 0, first.output
    path = tmp_path / "a" / "cache.jsonl"
    lines = path.read_bytes().splitlines()
    recs = [json.loads(x) for x in lines]
    ll = [i for i, r in enumerate(recs) if isinstance(r["value"], list)]
    gen = [i for i, r in enumerate(recs) if isinstance(r["value"], str)]
    assert len(ll) == 4 and len(gen) == 2
    lines[ll[0]] = lines[ll[0]][:20] + b"\xff\xfe" + lines[ll[0]][20:]  # not UTF-8
    lines[ll[1]] = json.dumps({"key": recs[ll[1]]["key"], "value": [float("nan"), True]}).encode()
    lines[ll[2]] = json.dumps({"key": recs[ll[2]]["key"], "value": "-0.5"}).encode()
    lines[gen[0]] = json.dumps({"key": recs[gen[0]]["key"], "value": ["x"]}).encode()
    _write_lines(path, lines)

    rerun = CliRunner().invoke(eval_main, [*args, str(tmp_path / "a")], catch_exceptions=False)
    assert rerun.exit_code == 0, rerun.output
    assert f"{path}: 1 damaged line and 3 values of the wrong shape ignored; those requests are computed again" in rerun.output
    assert _computed(rerun.output) == 4
    fresh = CliRunner().invoke(eval_main, [*args, str(tmp_path / "b")], catch_exceptions=False)
    got, want = (json.loads((tmp_path / d / "results.json").read_text("utf-8")) for d in "ab")
    assert got["results"] == want["results"] and got["status"] == "complete"
    for name in ("te_p1", "ner_adg_p1"):
        assert (tmp_path / "a" / "samples" / f"{name}.jsonl").read_bytes() == (tmp_path / "b" / "samples" / f"{name}.jsonl").read_bytes()
    assert "ignored" not in fresh.output


# ---------------------------------------------------------------- 10: a Hub-layout folder without manifest


def _hub_layout_without_manifest(build_dir: Path, dest: Path) -> Path:
    from evalita_data.hub.push import write_to_dir

    write_to_dir(build_dir, dest, echo=lambda _m: None)
    for manifest in dest.glob("*/manifest.json"):
        manifest.unlink()
    return dest


def test_hub_layout_without_manifest_is_checked_record_by_record(sample_build: Path, tiny_model: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from evalita_eval.sources.base import DataMismatch
    from evalita_eval.sources.entries import all_entries
    from evalita_eval.sources.folder import FolderSource

    hub = _hub_layout_without_manifest(sample_build, tmp_path / "hub")
    source = FolderSource(hub)
    loaded = {(e.name, s): source.load(e, s) for e in all_entries() for s in (e.spec.eval_split, e.spec.fewshot_split)
              if source.has_split(e, s)}
    assert ("te", "test") in loaded and ("ner_fic", "test") in loaded  # valid data still load
    te = next(e for e in all_entries() if e.name == "te")
    parquet = hub / "te" / "data" / "test.parquet"
    table = pq.read_table(parquet)
    rows = table.to_pylist()
    rows[1]["text2"] = None
    pq.write_table(table.from_pylist(rows), parquet)
    with pytest.raises(DataMismatch) as err:
        FolderSource(hub).load(te, "test")
    assert str(err.value).startswith(f"{parquet}: record 2: text2: None is not of type 'string';")

    sa_rows = [json.loads(x) for x in (DATA / "sa" / "test.jsonl").read_text("utf-8").splitlines()]
    label = "opos"
    sa_rows[2][label] = int(sa_rows[2][label])
    folder = tmp_path / "jsonl"
    (folder / "sa").mkdir(parents=True)
    (folder / "sa" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sa_rows), "utf-8")
    result = CliRunner().invoke(eval_main, ["run", "--model", str(tiny_model), "--data", str(folder), "--tasks", "sa",
                                            "--output-dir", str(tmp_path / "o")])
    assert result.exit_code != 0
    assert f"{folder / 'sa' / 'test.jsonl'}: record 3: {label}: {sa_rows[2][label]} is not of type 'string'" in result.output
    assert not (tmp_path / "o" / "results.json").exists()


# ---------------------------------------------------------------- 11: push --to-dir through symbolic links


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("link", ["te", "te/data"])
def test_to_dir_refuses_symlinked_folders_out_of_dir(sample_build: Path, tmp_path: Path, link: str) -> None:
    from evalita_data.cli import main as data_main

    dest, outside = tmp_path / "hub", tmp_path / "outside"
    outside.mkdir()
    (outside / "mine.txt").write_text("not yours", "utf-8")
    (dest / link).parent.mkdir(parents=True)
    (dest / link).symlink_to(outside, target_is_directory=True)
    result = CliRunner().invoke(data_main, ["push", "--build", str(sample_build), "--to-dir", str(dest), "--task", "te"])
    assert result.exit_code == 1
    assert f"resolves to {outside.resolve()}" in result.output and f"outside {dest}" in result.output
    assert _tree(outside) == {"mine.txt": b"not yours"}
    assert not any(p.is_file() for p in dest.rglob("*"))


# ---------------------------------------------------------------- 12: offline, as a new user


class ClosingServer:
    """A loopback TCP server that counts the connections it gets and closes each at once (no answer)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed by stop()
            self.connections += 1
            conn.close()

    def stop(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join()


@pytest.fixture
def dead_hub():
    server = ClosingServer()
    try:
        yield server
    finally:
        server.stop()


def _closed_port() -> str:
    with socket.socket() as s:  # a loopback port that nobody listens on once closed
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _offline_env(endpoint: str, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "HUGGING_FACE_", "TRANSFORMERS_"))}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(home), HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_TELEMETRY="1", NO_PROXY="127.0.0.1")
    return env


def test_fetch_offline_names_the_host_and_the_dataset(tmp_path: Path) -> None:
    endpoint = _closed_port()
    proc = run_cli(["fetch", "sum", "--raw", str(tmp_path / "raw")], _offline_env(endpoint, tmp_path / "hf"))
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == (
        f"error: cannot reach the Hub at {endpoint} for the dataset ARTeLab/fanpage (ConnectError: [Errno 111] Connection refused); "
        f"check the network or HF_ENDPOINT (nothing was written to {tmp_path / 'raw' / 'sum'})")
    assert not any(p.is_file() for p in tmp_path.joinpath("raw").rglob("*"))


def test_push_dry_run_offline_lists_every_task_after_one_attempt(sample_build: Path, dead_hub: ClosingServer, tmp_path: Path) -> None:
    proc = run_cli(["push", "--build", str(sample_build), "--dry-run"], _offline_env(dead_hub.url, tmp_path / "hf"))
    assert proc.returncode == 0, proc.stderr
    assert dead_hub.connections == 1  # one attempt for the whole dry run: no retries, no second task asking again
    lines = proc.stdout.splitlines()
    tasks = built_tasks(sample_build)
    heads = [line for line in lines if not line.startswith(" ")]
    assert len(heads) == len(tasks) + 1
    assert heads[0].startswith(f"evalita-llm/{tasks[0]}@main: could not compare with the remote ({dead_hub.url}/datasets/evalita-llm/{tasks[0]}: read: ")
    for task, head in zip(tasks[1:], heads[1:]):
        assert head.startswith(f"evalita-llm/{task}@main: could not compare with the remote (the Hub at {dead_hub.url} was not reachable")
    assert heads[-1] == f"dry run without the Hub: the local files of {len(tasks)} task(s) listed, none compared with {dead_hub.url}; nothing sent"
    manifest = json.loads((sample_build / "manifest.json").read_text("utf-8"))
    listed = [line.split()[-1] for line in lines if line.startswith("  local ")]
    # eval.yaml (the Hub benchmark file) where the task's evaluation split is built (not HS, REL from the samples)
    benchmark = {t: any(k.split("/")[-1] == get_task(t).eval_split for k in manifest["tasks"][t]["splits"]) for t in tasks}
    want = [p for t in tasks for p in ("README.md", "manifest.json", *(["eval.yaml"] if benchmark[t] else []),
                                       *(f"data/{k}.parquet" for k in manifest["tasks"][t]["splits"]))]
    assert sorted(t for t in tasks if not benchmark[t]) == ["hs", "rel"]
    assert listed == want


def test_export_lm_eval_exports_only_what_the_folder_holds(sample_build: Path, tmp_path: Path) -> None:
    import yaml

    from evalita_data.hub.push import write_to_dir
    from evalita_eval.sources.entries import all_entries

    pushed = tmp_path / "pushed"
    write_to_dir(sample_build, pushed, echo=lambda _m: None)
    (pushed / "te" / "data" / "dev.parquet").unlink()  # te without its few-shot split
    out = tmp_path / "lm_tasks"
    result = CliRunner().invoke(eval_main, ["export-lm-eval", str(out), "--data-dir", str(pushed)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"{pushed}: left out hs (no 'test_all'), rel (no 'test'): the folder does not hold that split"
    assert lines[1] == f"{pushed}: exported without fewshot_split (0-shot only) te (no 'dev')"
    held = [e.name for e in all_entries() if e.name not in ("hs", "rel")]
    assert yaml.safe_load((out / "evalita-llm.yaml").read_text("utf-8"))["task"] == [f"evalita-llm_{n}" for n in held]
    assert not list(out.glob("evalita-llm_hs*")) and not list(out.glob("evalita-llm_rel*"))
    te, wic = ((out / f"evalita-llm_{n}_p1.yaml").read_text("utf-8").splitlines() for n in ("te", "wic"))
    assert "test_split: test" in te and not [x for x in te if x.startswith("fewshot_split")] and "fewshot_split: dev" in wic
    assert lines[-1].startswith(f"{out}: ") and f"--include_path {out} --tasks evalita-llm " in lines[-1]
    utils = (out / "utils.py").read_text("utf-8")
    assert "process_te_p1 = " in utils and "process_hs_" not in utils and "process_rel_" not in utils
    empty = tmp_path / "empty" / "te"
    empty.mkdir(parents=True)
    refused = CliRunner().invoke(eval_main, ["export-lm-eval", str(tmp_path / "o2"), "--data-dir", str(empty.parent)])
    assert refused.exit_code != 0 and "holds the evaluation split of no registered task" in refused.output


def test_build_refuses_an_out_folder_of_another_tool(raw_copy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evalita_data.cli import main as data_main

    raw = raw_copy("te")
    out = tmp_path / "build"
    (out / "lib" / "evalita_data").mkdir(parents=True)  # what `pip install .` leaves in ./build
    (out / "lib" / "evalita_data" / "cli.py").write_text("# setuptools' copy", "utf-8")
    (out / "bdist.linux-x86_64").mkdir()
    before = _tree(out)
    result = CliRunner().invoke(data_main, ["build", "--raw", str(raw), "--out", str(out), "--task", "te"])
    assert result.exit_code == 1
    assert result.output.splitlines()[0] == (
        f"error: --out {out} is a folder holding bdist.linux-x86_64, lib, which evalita-data build did not write "
        "(another tool's folder, e.g. setuptools' build/?); a build never mixes with other files: "
        "choose another --out (default evalita-build) or move them away; nothing was built")
    assert _tree(out) == before and not out.is_symlink()

    # The default output folder is one no other tool writes; a rebuild into it (our link) and into an
    # older unversioned build folder (manifest.json and task folders only) still work.
    cwd = tmp_path / "cwd"
    (cwd / "build" / "lib").mkdir(parents=True)
    monkeypatch.chdir(cwd)
    for _ in range(2):
        ok = CliRunner().invoke(data_main, ["build", "--raw", str(raw), "--task", "te"])
        assert ok.exit_code == 0, ok.output
    default = cwd / "evalita-build"
    assert default.is_symlink() and sorted(p.name for p in default.iterdir()) == ["manifest.json", "te"]
    old_layout = cwd / "old"
    shutil.copytree(default, old_layout)  # a real folder, as evalita-data wrote before the versioned layout
    again = CliRunner().invoke(data_main, ["build", "--raw", str(raw), "--out", str(old_layout), "--task", "te"])
    assert again.exit_code == 0, again.output
    assert old_layout.is_symlink() and sorted(p.name for p in old_layout.iterdir()) == ["manifest.json", "te"]

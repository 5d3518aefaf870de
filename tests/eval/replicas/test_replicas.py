"""Data-parallel replicas on a real local Ray (2 CPUs): the same results.json and samples as one
replica, each replica loading its model once, and a replica killed mid-run restarted with
only its unfinished units (no line twice in cache.jsonl); generations (hf batches)
shared by both replicas, byte for byte those of one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_eval.api import BackendOptions, LLRequest
from evalita_eval.cli import main
from run_options import options_as_run_builds
from evalita_eval.replicas import create_backend, replica_settings
from evalita_eval.replicas.plan import assign, merge_shared_contexts

from paths import TEST_DATA
from replica_nodes import replica_nodes

ray = pytest.importorskip("ray")

DATA = TEST_DATA / "build"
# Two MC tasks (log-likelihood chunks of batch 2 x 4 requests) and a generative one (hf: batches of 2).
COMMON = ["--data", str(DATA), "--tasks", "te,sa,ls", "--limit", "5", "--batch-size", "2", "--max-new-tokens", "4", "--no-progress"]


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory):
    """One local Ray for the module (started here, stopped at the end). Ray saves its login token
    under the home folder (~/.ray/auth_token): a temporary one here, so a test leaves nothing there."""
    home = os.environ.get("HOME")
    os.environ["HOME"] = str(tmp_path_factory.mktemp("ray-home"))
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()
    if home is None:
        os.environ.pop("HOME", None)
    else:
        os.environ["HOME"] = home


def _run(model: Path, out: Path, *extra: str) -> dict:
    result = CliRunner().invoke(main, ["run", "--model", str(model), *COMMON, *extra, "--output-dir", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads((out / "results.json").read_text("utf-8"))


def _samples(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "samples").iterdir())}


def _cache_keys(out: Path) -> list[str]:
    return [json.loads(line)["key"] for line in (out / "cache.jsonl").read_text("utf-8").splitlines() if line.strip()]


def _same_run(one: dict, two: dict, out_one: Path, out_two: Path) -> None:
    assert two["results"] == one["results"] and two["model"] == one["model"]  # same numbers, same cache identity
    assert {k: v for k, v in two["config"].items() if k != "replicas"} == {k: v for k, v in one["config"].items() if k != "replicas"}
    assert (one["config"]["replicas"], two["config"]["replicas"]) == (1, 2)
    assert _samples(out_two) == _samples(out_one)
    keys = _cache_keys(out_two)
    assert len(keys) == len(set(keys)) and set(keys) == set(_cache_keys(out_one))


@pytest.mark.parametrize("backend", ["hf"])
def test_two_replicas_equal_one(local_ray, tiny_model: Path, tmp_path: Path, backend: str) -> None:
    one = _run(tiny_model, tmp_path / "one", "--backend", backend)
    two = _run(tiny_model, tmp_path / "two", "--backend", backend, "--backend-arg", "data_parallel_size=2")
    _same_run(one, two, tmp_path / "one", tmp_path / "two")
    assert two["results"]["te"]["p1"]["n"] == 3 and set(two["results"]) == {"te", "sa", "ls"}


# The CLI with the replicas' timeline logged (INFO, at close: eval/replicas/backend.py).
LOGGED_CLI = ("import logging; logging.basicConfig(); logging.getLogger('evalita_eval.replicas').setLevel(logging.INFO); "
              "from evalita_eval.cli import main; main()")


def test_the_cli_with_its_own_ray_equals_one_replica_and_logs_where_the_time_went(tiny_model: Path, tmp_path: Path) -> None:
    """The real CLI with its own local Ray: a data error is one line before any replica starts (no timeline); a run
    equals one replica and its timeline (bench/replicas.py --time) holds the loads and the end split. Replica 0 runs in
    the CLI's process (its own Ray, CPU): on the tiny model it may finish the run before replica 1 has loaded."""
    command = [sys.executable, "-c", LOGGED_CLI, "run", "--model", str(tiny_model), *COMMON,
               "--backend-arg", "data_parallel_size=2"]
    env = {**os.environ, "HOME": str(tmp_path)}
    bad = subprocess.run(command + ["--split", "nosuch", "--output-dir", str(tmp_path / "bad")], env=env,
                         capture_output=True, text=True, timeout=600)
    errors = [ln for ln in bad.stderr.splitlines() if ln.startswith("Error:")]
    assert bad.returncode == 1 and "Traceback" not in bad.stderr and len(errors) == 1, bad.stderr[-3000:]
    assert errors[0].startswith("Error: te: no split 'nosuch' in ") and "replica timeline" not in bad.stderr
    good = subprocess.run(command + ["--output-dir", str(tmp_path / "two")], env=env, capture_output=True, text=True,
                          timeout=600)
    assert good.returncode == 0, good.stderr[-3000:]
    [line] = [ln for ln in good.stderr.splitlines() if "replica timeline: " in ln]
    t = json.loads(line.split("replica timeline: ", 1)[1])
    assert [c["kind"] for c in t["calls"]] == ["loglikelihood", "generate_until"] and len(t["loads"]) in (1, 2)
    assert t["loads"][0][0] <= t["ray_ready"]  # replica 0 began loading before Ray was up
    assert t["calls"][-1]["ended"] <= t["closing"] <= t["stopped"] <= t["closed"]
    one = _run(tiny_model, tmp_path / "one")
    _same_run(one, json.loads((tmp_path / "two" / "results.json").read_text("utf-8")), tmp_path / "one", tmp_path / "two")


class _KillingReplicas:
    """Wraps on_result: the first result of replica 0 kills it (ray.kill), once, mid-call."""

    def __init__(self, backend) -> None:
        self.backend, self.killed = backend, 0

    def wrap(self, on_result):
        def report(index, value):
            on_result(index, value)
            if not self.killed and self.backend.units_done[0] == 1:
                self.killed += 1
                ray.kill(self.backend.actors[0])
        return report


def test_killed_replica_is_restarted_and_the_run_is_the_same(local_ray, tiny_model: Path, tmp_path: Path) -> None:
    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.run_config import RunSpec
    from evalita_eval.sources import open_source
    from evalita_eval.sources.entries import select_entries

    one = _run(tiny_model, tmp_path / "one")
    options = BackendOptions(model=str(tiny_model), batch_size=2, extra={"data_parallel_size": "2"})
    backend = create_backend("hf", options)
    killer = _KillingReplicas(backend)
    plain_ll, plain_gen = backend.loglikelihood, backend.generate_until
    # The runner hands the replicas every call of a request kind at once (``calls``: running/stream.py).
    backend.loglikelihood = lambda requests, on_result=None, calls=None: plain_ll(requests, killer.wrap(on_result), calls)
    backend.generate_until = lambda requests, on_result=None, calls=None: plain_gen(requests, killer.wrap(on_result), calls)
    config = RunSpec(model="m", data="data", device="cpu", limit=5, batch_size=2, max_new_tokens=4, progress=False)
    try:
        runner = Runner(backend, ModelInfo(str(tiny_model), None, backend.dtype, "hf"), open_source(str(DATA), None), config, tmp_path / "two")
        runner.run(select_entries(["te", "sa", "ls"]))
        assert killer.killed == 1 and backend.loads == 3  # two replicas, one restarted: each loaded its model once
        assert all(n > 0 for n in backend.units_done)  # both replicas worked
    finally:
        backend.close()
    two = json.loads((tmp_path / "two" / "results.json").read_text("utf-8"))
    _same_run(one, two, tmp_path / "one", tmp_path / "two")


def test_small_calls_of_the_whole_run_are_shared(local_ray, tiny_model: Path, tmp_path: Path) -> None:
    """One document per task and prompt: each prompt's log-likelihoods are one unit and its
    generation another. Handed every call of the run at once, both replicas work; one call at a
    time, each unit went to the first replica and the second idled."""
    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.run_config import RunSpec
    from evalita_eval.sources import open_source
    from evalita_eval.sources.entries import select_entries

    config = RunSpec(model="m", data="data", device="cpu", limit=1, batch_size=2, max_new_tokens=4, prompts=["p1", "p2"], progress=False)
    outs = {}
    for size in (1, 2):
        backend = create_backend("hf", BackendOptions(model=str(tiny_model), batch_size=2, extra={"data_parallel_size": str(size)}))
        try:
            # every replica loaded first: one still loading takes no unit (the others take its work), so on a loaded
            # machine the spread would be the load's, not the planner's
            if size > 1:
                replica_nodes(backend)
            runner = Runner(backend, ModelInfo(str(tiny_model), None, backend.dtype, "hf"), open_source(str(DATA), None), config, tmp_path / str(size))
            runner.run(select_entries(["te", "sa", "ls"]))
            done = list(getattr(backend, "units_done", [0]))
        finally:
            backend.close()
        outs[size] = json.loads((tmp_path / str(size) / "results.json").read_text("utf-8"))
    assert len(done) == 2 and sum(done) == 6 and min(done) > 0, done  # 3 tasks x 2 prompts, one unit each
    assert outs[2]["results"] == outs[1]["results"] and _samples(tmp_path / "2") == _samples(tmp_path / "1")


def test_replica_settings_and_errors() -> None:
    size, address, one = replica_settings(BackendOptions(model="m", extra={"data_parallel_size": "3", "ray_address": "10.0.0.1:6379", "gguf_file": "x"}))
    assert (size, address, one.extra) == (3, "10.0.0.1:6379", {"gguf_file": "x"})
    assert replica_settings(options_as_run_builds("hf", model="m", data_parallel_size=2))[0] == 2  # --backend-arg data_parallel_size=2
    with pytest.raises(ValueError, match=r"--backend-arg data_parallel_size: expected an integer, got 'two' \(the replicas of the model\)"):
        replica_settings(BackendOptions(model="m", extra={"data_parallel_size": "two"}))


def test_a_replica_takes_the_gpus_of_its_tensor_parallel_size() -> None:
    from evalita_eval.backends import get_backend_class

    def replica_resources(name: str, options: BackendOptions) -> dict:  # a replica reserves what its backend declares
        return get_backend_class(name).reservation(options)

    assert replica_resources("vllm", BackendOptions("m", device="cuda", extra={"tensor_parallel_size": "2"})) == {"num_cpus": 1, "num_gpus": 2}
    assert replica_resources("vllm", options_as_run_builds("vllm", model="m", device="cuda", tensor_parallel_size=4)) == {"num_cpus": 1, "num_gpus": 4}
    assert replica_resources("vllm", BackendOptions("m", device="cuda")) == {"num_cpus": 1, "num_gpus": 1}
    assert replica_resources("hf", BackendOptions("m", device="cuda")) == {"num_cpus": 1, "num_gpus": 1}
    assert replica_resources("hf", BackendOptions("m", threads=3)) == {"num_cpus": 3, "num_gpus": 0}


def test_without_ray_more_than_one_replica_names_the_extra(monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(RuntimeError, match=r"pip install -e '\.\[ray\]'"):
        create_backend("hf", BackendOptions(model="m", extra={"data_parallel_size": "2"}))


def test_prefix_groups_stay_together_and_tokens_are_balanced() -> None:
    requests = [LLRequest(c, x) for c in ("a", "b", "c") for x in ("1", "2", "3")]
    # Calls of 4: the second call holds "b" (with the first) and "c" (with the third): one group.
    calls = [[0, 1, 2, 3], [4, 5, 6, 7], [8]]
    assert merge_shared_contexts(calls, [r.context for r in requests]) == [[[0, 1, 2, 3], [4, 5, 6, 7], [8]]]
    assert merge_shared_contexts([[0, 1, 2], [3, 4, 5], [6, 7, 8]], [r.context for r in requests]) == [[[0, 1, 2]], [[3, 4, 5]], [[6, 7, 8]]]
    # Largest first to the least loaded: 10 -> r0, 6 -> r1, 5 -> r1 (6 < 10), 4 -> r0 (11 > 10) ... by tokens, not by count.
    assert assign([5, 10, 4, 6, 1], 2) == [[1, 2], [0, 3, 4]]


def _ls_data(root: Path, docs: int) -> Path:
    """A data folder whose ls test split has ``docs`` records (variants of the committed three)."""
    base = [json.loads(line) for line in (DATA / "ls" / "test.jsonl").read_text("utf-8").splitlines()]
    (root / "ls").mkdir(parents=True)
    (root / "ls" / "dev.jsonl").write_bytes((DATA / "ls" / "dev.jsonl").read_bytes())
    words = "oggi ieri domani spesso sempre mai ancora forse davvero quasi proprio subito".split()
    records = [{**base[k % 3], "id": f"ls{k}", "context": f"{words[k % len(words)]} " * (1 + k % 4) + base[k % 3]["context"]} for k in range(docs)]
    (root / "ls" / "test.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")
    return root


def _generate(name: str, model: Path, data: Path, out: Path, extra: dict[str, str]) -> list[int]:
    """The ls task (12 documents x 2 prompts, 4 new tokens) through the runner on ``name`` with
    ``extra`` backend args, contexts cut to 64 tokens; the units each replica ran (one replica: [])."""
    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.run_config import RunSpec
    from evalita_eval.sources import open_source
    from evalita_eval.sources.entries import select_entries

    backend = create_backend(name, BackendOptions(model=str(model), batch_size=2, max_length=64, extra=dict(extra)))
    try:
        if "data_parallel_size" in extra:
            replica_nodes(backend)  # every replica loaded: one still loading takes no unit (the spread would be the load's)
        config = RunSpec(model="m", data="data", device="cpu", batch_size=2, max_new_tokens=4, progress=False)
        Runner(backend, ModelInfo(str(model), None, backend.dtype, name), open_source(str(data), None), config, out).run(select_entries(["ls"]))
        return list(getattr(backend, "units_done", []))
    finally:
        backend.close()


@pytest.mark.parametrize("backend", ["hf"])
def test_generations_are_shared_by_two_replicas_and_equal_one(local_ray, tiny_model: Path, tmp_path: Path, backend: str) -> None:
    data = _ls_data(tmp_path / "data", 12)
    extra: dict = {}
    _generate(backend, tiny_model, data, tmp_path / "one", extra)
    done = _generate(backend, tiny_model, data, tmp_path / "two", {**extra, "data_parallel_size": "2"})
    assert len(done) == 2 and all(n > 0 for n in done), done  # both replicas generated
    assert sum(done) == 12  # hf: 6 batches of 2 a prompt
    one, two = (json.loads((tmp_path / run / "results.json").read_text("utf-8")) for run in ("one", "two"))
    assert two["results"] == one["results"] and two["results"]["ls"]["p1"]["n"] == 12
    assert _samples(tmp_path / "two") == _samples(tmp_path / "one")
    keys = _cache_keys(tmp_path / "two")
    assert len(keys) == len(set(keys)) == 24

"""Two Ray nodes on this machine (Ray's own ``ray.cluster_utils.Cluster``: a head without CPUs, as a cluster's head
often is, and two workers of one CPU each, one with a fake GPU): replicas spread over both nodes, a sweep's runs on
both, an hf run without a device reserving the GPU, a node that cannot read a path named in one line, and (last: it
removes a node) a node lost mid-sweep whose run is resumed on the other node, computing only what was missing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalita_eval.api import BackendOptions
from evalita_eval.replicas import create_backend

from paths import TEST_DATA
from replica_nodes import replica_nodes

ray = pytest.importorskip("ray")
DATA = TEST_DATA / "build"
STARTED = re.compile(r"^\[(\d+)/\d+\] .*: started on .*, node \S+ ([0-9a-f]{8}) \(pid \d+\)$", re.M)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    """(the cluster, its GPU node, its CPU node); Ray's token under a temporary HOME, as in test_replicas.py."""
    from ray.cluster_utils import Cluster

    from ray._private.authentication_test_utils import reset_auth_token_state

    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(tmp_path_factory.mktemp("ray-home")))
        # A local ray.init earlier in this process (test_replicas.py, a sweep) turned on token auth for the process
        # (RAY_AUTH_MODE=token in os.environ, its token under that test's HOME): this cluster on 127.0.0.1 starts
        # without, as Ray's own tests switch it (else its GCS finds no token and the start times out).
        env.setenv("RAY_AUTH_MODE", "disabled")
        reset_auth_token_state()
        for attempt in range(3):  # a loaded machine can miss Ray's fixed start-up waits (as ray_start.py says)
            try:
                nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        try:
            yield nodes, nodes.add_node(num_cpus=1, num_gpus=1), nodes.add_node(num_cpus=1)
        finally:
            nodes.shutdown()
    reset_auth_token_state()  # the process's own mode again (the env restored)


def _runner_run(backend, model: Path, out: Path) -> dict:
    from evalita_eval.run_config import RunSpec
    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.sources import open_source
    from evalita_eval.sources.entries import select_entries

    config = RunSpec(model="m", data="data", device="cpu", limit=2, batch_size=2, max_new_tokens=4, prompts=["p1", "p2"],
                     progress=False)
    Runner(backend, ModelInfo(str(model), None, backend.dtype, "hf"), open_source(str(DATA), None), config, out).run(select_entries(["te", "ls"]))
    return json.loads((out / "results.json").read_text("utf-8"))


def test_replicas_spread_over_both_nodes_and_equal_one(cluster, tiny_model: Path, tmp_path: Path) -> None:
    nodes, gpu, cpu = cluster
    backend = create_backend("hf", BackendOptions(model=str(tiny_model), batch_size=2, extra={"data_parallel_size": "2", "ray_address": nodes.address}))
    try:
        where = {n.split()[1] for n in replica_nodes(backend)}
        two = _runner_run(backend, tiny_model, tmp_path / "two")
        done = list(backend.units_done)
    finally:
        backend.close()
    assert where == {gpu.node_id[:8], cpu.node_id[:8]}  # one replica (one CPU) on each worker
    assert min(done) > 0, done  # both worked
    plain = create_backend("hf", BackendOptions(model=str(tiny_model), batch_size=2))
    try:
        one = _runner_run(plain, tiny_model, tmp_path / "one")
    finally:
        plain.close()
    assert two["results"] == one["results"]
    assert [p.read_bytes() for p in sorted((tmp_path / "two" / "samples").iterdir())] == \
        [p.read_bytes() for p in sorted((tmp_path / "one" / "samples").iterdir())]


def _sweep(address: str, tmp_path: Path, runs: list[dict], name: str) -> subprocess.Popen:
    file = tmp_path / f"{name}.json"
    file.write_text(json.dumps({"defaults": {"data": str(DATA), "tasks": "te", "batch_size": 1, "backend_args": {"gguf_file": "none"}},
                                "runs": runs}), "utf-8")
    return subprocess.Popen([sys.executable, "-m", "evalita_eval.cli", "sweep", str(file), "--out", str(tmp_path / f"{name}-report"),
                             "--ray-address", address], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))


def _started(said: str) -> dict[int, list[str]]:
    """Run number -> the nodes (id prefixes) it was started on, in order."""
    out: dict[int, list[str]] = {}
    for run, node in STARTED.findall(said):
        out.setdefault(int(run), []).append(node)
    return out


def test_a_sweeps_runs_land_on_both_nodes_and_a_run_without_device_reserves_the_gpu(cluster, tiny_model: Path, tmp_path: Path) -> None:
    nodes, gpu, cpu = cluster
    # Two CPU runs (one CPU each): one on each worker. Two hf runs without a device: `run` takes CUDA where there is
    # one, so each reserves the GPU and both run on its node, one after the other (before: 0 GPUs, spread).
    for name, device, expected in (("cpu", {"device": "cpu"}, {gpu.node_id[:8], cpu.node_id[:8]}), ("gpu", {}, {gpu.node_id[:8]})):
        runs = [{"name": f"{name}{k}", "model": str(tiny_model), "limit": k, "output_dir": str(tmp_path / f"{name}{k}"), **device} for k in (1, 2)]
        sweep = _sweep(nodes.address, tmp_path, runs, name)
        said, _ = sweep.communicate(timeout=600)
        assert sweep.returncode == 0, said
        started = _started(said)
        assert sorted(started) == [1, 2] and all(len(n) == 1 for n in started.values()), said  # each started once
        assert {n for ns in started.values() for n in ns} == expected, said
        assert all((tmp_path / r["name"] / "results.json").is_file() for r in runs)


def test_a_node_that_cannot_read_a_path_says_so_in_one_line(cluster, tmp_path: Path) -> None:
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from evalita_eval.sweep import run_one

    nodes, _, cpu = cluster
    ray.init(address=nodes.address, log_to_driver=False)
    try:
        there = NodeAffinitySchedulingStrategy(cpu.node_id, soft=False)
        missing = str(tmp_path / "not-on-this-node")
        code, line, folder = ray.get(ray.remote(run_one).options(scheduling_strategy=there).remote(
            "unused.yaml", str(tmp_path / "log"), str(tmp_path), None, 0, {"data folder": missing}))
    finally:
        ray.shutdown()
    assert (code, folder) == (1, None) and "\n" not in line
    assert line == (f"node {cpu.node_ip_address} {cpu.node_id[:8]} cannot read the data folder {missing}: every node of the cluster "
                    "needs it at that path (shared storage)")
    assert not (tmp_path / "log").exists()  # nothing was started


def _keys(folder: Path) -> list[str]:
    path = folder / "cache.jsonl"
    return [json.loads(line)["key"] for line in path.read_text("utf-8").splitlines() if line.endswith("}")] if path.is_file() else []


def test_a_node_lost_mid_sweep_hands_its_run_to_the_other_node(cluster, tiny_model: Path, tmp_path: Path) -> None:
    """Last in this file: it removes a node. The run generates 128 tokens a request, each written to the cache as it
    ends; its node is removed once some are: Ray starts the run again on the other node, which resumes from the cache."""
    nodes, gpu, cpu = cluster
    out = tmp_path / "ce"
    sweep = _sweep(nodes.address, tmp_path, [{"name": "ce", "model": str(tiny_model), "setting": "ce", "limit": 3, "max_new_tokens": 128,
                                              "device": "cpu", "output_dir": str(out)}], "lost")
    said = ""
    try:
        while not STARTED.search(said):  # the line naming its node
            said += sweep.stdout.readline()
            assert sweep.poll() is None, said
        first = STARTED.search(said)[2]
        while not _keys(out):
            assert sweep.poll() is None, said
            time.sleep(0.05)
        nodes.remove_node(gpu if gpu.node_id.startswith(first) else cpu, allow_graceful=False)
        saved = set(_keys(out))
        rest, _ = sweep.communicate(timeout=600)
        said += rest
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 0, said
    (nodes_used,) = _started(said).values()
    assert nodes_used[0] == first and len(set(nodes_used)) == 2, said  # started again on the other node
    keys = _keys(out)
    assert len(keys) == len(set(keys)) and saved <= set(keys)  # nothing computed twice, nothing saved lost
    counts = re.findall(r"(\d+) requests computed, (\d+) read from the cache", (tmp_path / "lost-report" / "logs" / "1.log").read_text("utf-8"))
    computed, cached = map(int, counts[-1])
    assert cached >= len(saved) > 0 and computed + cached == len(keys), counts  # the rerun computed only what was missing
    assert json.loads((out / "results.json").read_text("utf-8"))["status"] == "complete"

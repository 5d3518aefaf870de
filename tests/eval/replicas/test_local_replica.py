"""Replicas with a Ray of their own on CPUs: replica 0 runs in the driver's process (it loads while Ray starts, docs/
parallel.md#replicas) beside Ray actors; a killed actor is restarted with only its unfinished units, and the run is
byte for byte that of one replica; closing stops the Ray the backend started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalita_eval.api import BackendOptions
from evalita_eval.replicas import create_backend

from paths import TEST_DATA

ray = pytest.importorskip("ray")

DATA = TEST_DATA / "build"
TASKS = ["te", "sa", "ls"]


def _run(backend, model: Path, out: Path) -> dict:
    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.run_config import RunSpec
    from evalita_eval.sources import open_source
    from evalita_eval.sources.entries import select_entries

    config = RunSpec(model="m", data="data", device="cpu", limit=5, batch_size=2, max_new_tokens=4, progress=False)
    Runner(backend, ModelInfo(str(model), None, backend.dtype, "hf"), open_source(str(DATA), None), config, out).run(
        select_entries(TASKS))
    return json.loads((out / "results.json").read_text("utf-8"))


def _files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "samples").iterdir())}


def test_replica_zero_in_the_driver_and_a_killed_actor(tiny_model: Path, tmp_path: Path, monkeypatch) -> None:
    # Ray saves a login token under the home folder, and a local start turns token mode on for the whole process
    # (RAY_AUTH_MODE in os.environ, the token under this HOME): off here, so later tests start their own Rays.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert not ray.is_initialized()
    one_backend = create_backend("hf", BackendOptions(model=str(tiny_model), batch_size=2))
    try:
        one = _run(one_backend, tiny_model, tmp_path / "one")
    finally:
        one_backend.close()
    backend = create_backend("hf", BackendOptions(model=str(tiny_model), batch_size=2, extra={"data_parallel_size": "2"}))
    killed = []
    try:
        assert ray.is_initialized() and backend.actors[0] is None and backend.actors[1] is not None
        ray.get(backend.actors[1].__ray_call__.remote(lambda replica: None))  # its model loaded: it takes units
        plain = backend._dispatch

        def dispatch(kind, requests, on_result, calls=None):
            def report(index, value):  # replica 1 killed once, after its first unit
                on_result(index, value)
                if not killed and backend.units_done[1] == 1:
                    killed.append(backend.actors[1])
                    ray.kill(backend.actors[1])
            return plain(kind, requests, report, calls)

        backend._dispatch = dispatch
        two = _run(backend, tiny_model, tmp_path / "two")
        assert len(killed) == 1 and backend.loads == 3 and backend.actors[1] is not killed[0]  # started again
        assert backend.units_done[0] > 0 and backend.units_done[1] >= 1  # the driver's replica and the actor worked
    finally:
        backend.close()
    assert not ray.is_initialized()  # the Ray the backend started is stopped
    assert two["results"] == one["results"] and two["model"] == one["model"]
    assert two["config"]["replicas"] == 2 and _files(tmp_path / "two") == _files(tmp_path / "one")
    keys = [json.loads(line)["key"] for line in (tmp_path / "two" / "cache.jsonl").read_text("utf-8").splitlines()]
    assert len(keys) == len(set(keys))  # a unit's results reported once

"""--backend vllm with ``data_parallel_size=2``: two replicas (Ray actors, each one vLLM engine on
the CPU) on a local Ray started here, against one replica (the plain path, no Ray): the same
results.json and samples, and vLLM's own counters summed over the replicas show the prefix reuse
of one replica (eval/replicas/prefix_groups.py keeps the requests that share cached blocks together).

Skipped without vLLM; ``.ci/run`` runs it in ``.venv-vllm``, where Ray must be installed too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from .engine_helpers import assert_same_run, requires_vllm, run_in_process
from evalita_eval.api import BackendOptions
from vllm_blocks import engine_counters

pytestmark = requires_vllm
if importlib.util.find_spec("ray") is None and os.environ.get("EVALITA_REQUIRE_VLLM") == "1":
    raise RuntimeError("EVALITA_REQUIRE_VLLM=1 but Ray is not importable: the vLLM replica tests would be skipped (pip install '.[ray]')")
ray = pytest.importorskip("ray")

# Stats on (the counters), KV blocks of 32 tokens (the CPU backend wants multiples of 32; its default is 128).
ENGINE_ARGS = {"enforce_eager": True, "disable_log_stats": False, "block_size": 32}
# MC tasks (choices sharing a context), a generative one; every prompt of each; 1-shot: long shared prefixes.
TASKS = ["te", "sa", "wic", "ls"]
CONFIG = {"limit": 4, "max_new_tokens": 8, "num_fewshot": 1}


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray of 2 CPUs on 127.0.0.1 for the module, in a temporary folder, stopped at the end
    (ray.shutdown stops the processes it started). Ray saves its login token under the home folder
    (~/.ray/auth_token): a temporary home here, so the test leaves nothing there."""
    home, scratch = os.environ.get("HOME"), Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # short: Ray's socket paths
    os.environ["HOME"] = str(scratch / "home")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1", _temp_dir=str(scratch / "r"))
    try:
        yield
    finally:
        ray.shutdown()
        if home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = home
        shutil.rmtree(scratch, ignore_errors=True)


def _backend(model: Path, replicas: int):
    from evalita_eval.replicas import create_backend

    extra = {"vllm_engine_args": ENGINE_ARGS, "data_parallel_size": str(replicas)}
    return create_backend("vllm", BackendOptions(model=str(model), dtype="float32", extra=extra))


def _run_counted(model: Path, replicas: int, out: Path) -> tuple[dict, dict[str, float], list[int]]:
    """results.json of a run on ``replicas`` replicas, vLLM's counters over the run (summed over the
    replicas), and the units each replica ran (one replica: [])."""
    backend = _backend(model, replicas)
    try:
        assert getattr(backend, "replicas", 1) == replicas
        before = engine_counters(backend)
        results = run_in_process(backend, "vllm", model, out, TASKS, **CONFIG)
        after = engine_counters(backend)
        units = list(getattr(backend, "units_done", []))
        if replicas > 1:
            assert backend.loads == replicas  # each replica loaded its model once, for the whole run
    finally:
        backend.close()
    return results, {k: after[k] - before[k] for k in after}, units


def test_two_replicas_equal_one_and_keep_its_prefix_reuse(tiny32: Path, local_ray, tmp_path: Path) -> None:
    one, one_counted, _ = _run_counted(tiny32, 1, tmp_path / "one")
    two, two_counted, units = _run_counted(tiny32, 2, tmp_path / "two")
    # The same scores and cache identity; the same predictions and generations, log-likelihoods
    # within float rounding: vLLM's CPU kernels round by the composition of the engine's batches,
    # which two engines cannot reproduce (one engine's calls differ in the same way).
    assert two["results"] == one["results"] and two["model"] == one["model"]
    assert (one["config"].pop("replicas"), two["config"].pop("replicas")) == (1, 2) and two["config"] == one["config"]
    assert assert_same_run(tmp_path / "one", tmp_path / "two") == 168  # every choice of every MC item (te, sa, wic: 3-4 documents, every prompt)
    assert set(two["results"]) == set(TASKS) and two["results"]["te"]["p1"]["n"] == 3  # the fixture has 3 documents
    assert all(n > 0 for n in units), units  # both replicas worked
    # The same requests reached the engines; the prefix cache served as many of their tokens.
    assert two_counted["vllm:request_success"] == one_counted["vllm:request_success"]
    assert two_counted["vllm:prompt_tokens"] == one_counted["vllm:prompt_tokens"]
    computed_one = one_counted["vllm:prompt_tokens"] - one_counted["vllm:prompt_tokens_cached"]
    computed_two = two_counted["vllm:prompt_tokens"] - two_counted["vllm:prompt_tokens_cached"]
    assert one_counted["vllm:prompt_tokens_cached"] > computed_one  # there is reuse to keep: most prompt tokens come from the cache
    assert abs(computed_two - computed_one) <= 0.05 * computed_one, (computed_one, computed_two)
    print(json.dumps({"computed_prompt_tokens": {"one": computed_one, "two": computed_two}, "one": one_counted, "two": two_counted}))

"""Backends are discovered like tasks (the package's modules and the ``evalita_llm.backends``
entry point of other distributions), and each owns its options (``Backend.Options``), filled
from ``--backend-arg NAME=VALUE`` with types checked; the engine flags stay as aliases."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evalita_eval.api import Backend, BackendOptions
from evalita_eval.backend_support.options import BackendOptionError, resolve_options
from evalita_eval.backends import ENTRY_POINT_GROUP, get_backend_class

from paths import TEST_DATA

DATA = TEST_DATA / "build"

PLUGIN = '''
from __future__ import annotations

from dataclasses import dataclass

from evalita_eval.api import Backend, Capabilities, LLResult, backend_option


@dataclass(frozen=True)
class LengthOptions:
    scale: float = backend_option(1.0, "log-likelihood per character of the answer")
    label: str = backend_option("x", "a name that cannot change a number", changes_numbers=False)


class LengthBackend(Backend):
    """Scores an answer by minus its length times scale."""

    capabilities = Capabilities(loglikelihood=True, generate=False, chat_template=False)
    Options = LengthOptions
    dtype = "none"

    @classmethod
    def from_options(cls, options):
        return cls()

    def loglikelihood(self, requests):
        scale = self.engine_options.scale
        return [LLResult(-scale * len(r.continuation), False, len(r.continuation)) for r in requests]

    def cache_identity(self):
        return {**super().cache_identity(), "resolved": {"rule": "minus the length", "rule_version": 2}}


class LooseBackend(LengthBackend):
    """Adds a key of its own beside the declared ones."""

    def cache_identity(self):
        return {**super().cache_identity(), "rule": "minus the length"}
'''


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A distribution installed by hand: a package and a dist-info whose entry point names its backend class."""
    root = tmp_path_factory.mktemp("site")
    (root / "lengths_backend").mkdir()
    (root / "lengths_backend" / "__init__.py").write_text(textwrap.dedent(PLUGIN), "utf-8")
    info = root / "lengths_backend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lengths-backend\nVersion: 1.0\n", "utf-8")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nlengths = lengths_backend:LengthBackend\n"
                                               "loose = lengths_backend:LooseBackend\n", "utf-8")
    return root


def _cli(plugin_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_path), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", *args], env=env, capture_output=True, text=True)


def test_an_installed_backend_is_listed_with_its_options(plugin_path: Path) -> None:
    listed = _cli(plugin_path, "backends")
    assert listed.returncode == 0, listed.stderr
    block = listed.stdout.split("\nlengths  (lengths_backend.LengthBackend): Scores an answer by minus its length times scale.\n")[1]
    assert block.splitlines()[0].split() == ["scale", "float", "default", "1.0", "log-likelihood", "per", "character", "of", "the", "answer"]
    assert "cannot change a number" in block.splitlines()[1]
    helped = _cli(plugin_path, "run", "--help")
    assert helped.returncode == 0 and "lengths" in helped.stdout
    assert "--tensor-parallel-size" not in helped.stdout and "--base-url" not in helped.stdout  # engine flags: `backends` lists them


def test_an_installed_backend_runs_with_its_typed_options(plugin_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["run", "--backend", "lengths", "--model", "none", "--data", str(DATA), "--tasks", "te", "--limit", "2", "--output-dir", str(out)]
    first = _cli(plugin_path, *args, "--backend-arg", "scale=2")
    assert first.returncode == 0, first.stderr
    assert "\n24 requests computed, 0 read from the cache" in first.stdout
    doc = json.loads((out / "results.json").read_text("utf-8"))
    assert doc["status"] == "complete" and doc["model"]["backend"] == "lengths" and doc["model"]["options"] == {"scale": 2.0}
    assert doc["model"]["resolved"] == {"rule": "minus the length", "rule_version": 2}  # its own keys, in their room
    reported = _cli(plugin_path, "report", str(out), "--out", str(tmp_path / "report"), "--bootstrap", "0")
    assert reported.returncode == 0, reported.stderr  # the record reader takes the room back
    samples = [json.loads(x) for x in (out / "samples" / "te_p1.jsonl").read_text("utf-8").splitlines()]
    assert all(ll == -2.0 * len(" " + c) for s in samples for ll, c in zip(s["loglikelihoods"], s["choices"]))
    assert "\n0 requests computed, 24 read" in _cli(plugin_path, *args, "--backend-arg", "scale=2.0", "--backend-arg", "label=y").stdout
    # another scale is another run: its folder's results replaced (--overwrite), nothing read back
    assert "\n24 requests computed, 0 read" in _cli(plugin_path, *args, "--backend-arg", "scale=3", "--overwrite").stdout
    bad = _cli(plugin_path, *args, "--backend-arg", "scale=lots")
    assert bad.returncode == 2 and "Error: --backend-arg scale (backend 'lengths'): expected a number, got 'lots'" in bad.stderr
    unknown = _cli(plugin_path, *args, "--backend-arg", "scal=2")
    assert unknown.returncode == 2 and "--backend-arg scal: backend 'lengths' has no such option (its options: scale, label;" in unknown.stderr


# ------------------------------------------------------------------ options of the built-in backends


def test_values_are_converted_to_the_declared_types() -> None:
    vllm, server = get_backend_class("vllm"), get_backend_class("openai-completions")
    options, engine = resolve_options(vllm, BackendOptions("m", extra={"tensor_parallel_size": "2", "vllm_engine_args": '{"enforce_eager": true}'}))
    assert (engine.tensor_parallel_size, engine.vllm_engine_args) == (2, {"enforce_eager": True})
    assert options.engine.tensor_parallel_size == 2 and options.extra == {"tensor_parallel_size": 2, "vllm_engine_args": {"enforce_eager": True}}
    options, engine = resolve_options(server, BackendOptions("m", extra={"server_token_ids": "false", "base_url": "http://h/v1"}))
    assert engine.server_token_ids is False and options.extra["server_token_ids"] is False and options.engine.base_url == "http://h/v1"
    for extra, message in [
        ({"tensor_parallel_size": "two"}, "--backend-arg tensor_parallel_size (backend 'vllm'): expected an integer, got 'two'"),
        ({"gpu_memory_utilization": "nan"}, "expected a finite number, got 'nan'"),
        ({"vllm_engine_args": "{"}, "expected JSON object or none in JSON, got '{'"),
        ({"vllm_engine_args": "[1]"}, "expected a mapping of NAME: VALUE, got [1]"),
        ({"tensor_paralel_size": "2"}, "backend 'vllm' has no such option (its options: tensor_parallel_size, data_parallel_size,"),
    ]:
        with pytest.raises(BackendOptionError, match=re.escape(message)):
            resolve_options(vllm, BackendOptions("m", extra=extra))


def test_a_backend_without_options_takes_no_backend_arg() -> None:
    class Free(Backend):
        name = "free"

        @classmethod
        def from_options(cls, options: BackendOptions) -> "Free":
            return cls()

    options, engine = resolve_options(Free, BackendOptions("m"))
    assert engine is None and options.extra == {}
    with pytest.raises(BackendOptionError, match=re.escape("--backend-arg anything: backend 'free' has no such option "
                                                           "(its options: none;")):
        resolve_options(Free, BackendOptions("m", extra={"anything": "1"}))


def test_an_installed_backend_with_an_undeclared_identity_key_is_refused_before_work(plugin_path: Path,
                                                                                      tmp_path: Path) -> None:
    """A key of its own beside the declared ones would be a results.json the reader refuses: the run stops at its
    start, naming the key and where a backend's own keys go."""
    out = tmp_path / "out"
    done = _cli(plugin_path, "run", "--backend", "loose", "--model", "none", "--data", str(DATA), "--tasks", "te",
                "--limit", "2", "--output-dir", str(out))
    assert done.returncode != 0 and "backend 'loose': its cache_identity() has a key results.json does not declare" in done.stderr
    assert "'rule'" in done.stderr and "cache_identity()['resolved']" in done.stderr
    assert not (out / "results.json").exists() and "requests computed" not in done.stdout

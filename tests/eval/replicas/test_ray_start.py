"""Starting Ray or joining a cluster (eval/replicas/ray_start.py): a start-up that fails is one
line saying why and what to set; a local start that times out is tried again within a wait the
user can raise; a user's Ray token is used when joining a cluster with token authentication.

Ray's failures are simulated where a real one would be slow or depend on the machine's load
(the raylet's fixed 30 s); a refusing address goes through the real CLI."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from evalita_eval.replicas.ray_start import START_WAIT_ENV, RayStartError, failure_line, start_ray

from paths import TEST_DATA

ray = pytest.importorskip("ray")

STARTUP_TIMEOUT = Exception("The current node timed out during startup. This could happen because some of the raylet failed to startup or the GCS has become overloaded.")


class FakeRay:
    """``ray.init`` failing ``fails`` times with ``error``, then starting; counts the shutdowns."""

    def __init__(self, fails: int, error: Exception) -> None:
        self.fails, self.error, self.inits, self.shutdowns = fails, error, 0, 0

    def init(self, **kwargs) -> None:
        self.inits += 1
        if self.inits <= self.fails:
            raise self.error

    def shutdown(self) -> None:
        self.shutdowns += 1


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch):
    def install(fails: int, error: Exception = STARTUP_TIMEOUT) -> FakeRay:
        fake = FakeRay(fails, error)
        monkeypatch.setattr(ray, "init", fake.init)
        monkeypatch.setattr(ray, "shutdown", fake.shutdown)
        return fake

    return install


def test_a_local_start_that_times_out_is_tried_again_within_the_wait(fake_ray, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(START_WAIT_ENV, "600")
    fake = fake_ray(2)
    start_ray(None, num_cpus=2)
    assert (fake.inits, fake.shutdowns) == (3, 2)  # two timed-out tries cleaned up, the third started


def test_a_local_start_that_keeps_timing_out_is_one_line_naming_what_to_set(fake_ray, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(START_WAIT_ENV, "0")
    fake = fake_ray(5)
    with pytest.raises(RayStartError) as err:
        start_ray(None, num_cpus=2)
    line = str(err.value)
    assert (fake.inits, fake.shutdowns) == (1, 1)
    assert "\n" not in line and line.startswith("a local Ray could not start within 0 s")
    assert f"set {START_WAIT_ENV}" in line and "ray start --head" in line and "ray_address=127.0.0.1:6379" in line


def test_other_failures_go_up_unchanged_and_a_bad_wait_is_named(fake_ray, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_ray(1, ValueError("num_cpus must be positive"))
    with pytest.raises(ValueError, match="num_cpus must be positive"):
        start_ray(None, num_cpus=2)
    assert (fake.inits, fake.shutdowns) == (1, 0)
    monkeypatch.setenv(START_WAIT_ENV, "two minutes")
    with pytest.raises(RayStartError, match=rf"^{START_WAIT_ENV}='two minutes': expected seconds"):
        start_ray(None)


def test_a_cluster_that_refuses_the_run_names_the_token_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What ray.init raises when the cluster's token check fails: a ConnectionError naming no reason.
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    refused = ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")
    line = failure_line(refused, "10.0.0.1:6379", 3.0)
    assert line.startswith("the Ray cluster at 10.0.0.1:6379 did not let this run join (ConnectionError: Failed to connect")
    assert "RAY_AUTH_MODE=unset, no token (" in line and "RAY_AUTH_MODE=token and its token in RAY_AUTH_TOKEN" in line
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("abc", "utf-8")
    assert f"the token in {tmp_path / '.ray' / 'auth_token'}" in failure_line(refused, "10.0.0.1:6379", 3.0)
    assert failure_line(refused, None, 3.0) is None  # a local start: not about tokens


def _token_mode(tmp_path: Path, address: str | None, **env: str) -> list:
    """(set here?, RAY_AUTH_MODE after) in a fresh interpreter: Ray reads its mode once, at import."""
    full = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    code = ("import json, os, sys; from evalita_eval.replicas.ray_start import use_token_if_present; "
            f"print(json.dumps([use_token_if_present({address!r}), os.environ.get('RAY_AUTH_MODE'), 'ray' in sys.modules]))")
    proc = subprocess.run([sys.executable, "-c", code], env={**full, "HOME": str(tmp_path), **env}, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_users_token_turns_token_mode_on_when_joining_a_cluster(tmp_path: Path) -> None:
    assert _token_mode(tmp_path, "10.0.0.1:6379") == [False, None, False]  # no token: Ray's default
    assert _token_mode(tmp_path, "10.0.0.1:6379", RAY_AUTH_TOKEN="abc") == [True, "token", False]
    assert _token_mode(tmp_path, "10.0.0.1:6379", RAY_AUTH_TOKEN_PATH=str(tmp_path / "missing")) == [False, None, False]
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("abc", "utf-8")
    assert _token_mode(tmp_path, "10.0.0.1:6379") == [True, "token", False]  # ray start --head's own file
    assert _token_mode(tmp_path, "10.0.0.1:6379", RAY_AUTH_MODE="disabled") == [False, "disabled", False]  # the user's choice stands
    assert _token_mode(tmp_path, None) == [False, None, False]  # a local Ray: Ray decides itself


def test_an_address_nobody_answers_is_one_line_of_the_cli(tiny_model: Path, tmp_path: Path) -> None:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(tiny_model), "--data", str(TEST_DATA / "build"),
                           "--tasks", "te", "--limit", "1", "--no-progress", "--backend-arg", "data_parallel_size=2",
                           "--backend-arg", f"ray_address=127.0.0.1:{port}", "--output-dir", str(tmp_path / "o")],
                          env={**os.environ, "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and errors[0].startswith(f"Error: no Ray cluster answered at 127.0.0.1:{port} ("), proc.stderr[-2000:]
    assert "ray start --head" in errors[0] and not (tmp_path / "o" / "results.json").exists()

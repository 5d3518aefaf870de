"""Starting Ray, or joining a cluster, with one line when it cannot be done (docs/parallel.md, "Starting Ray": the
retried local start, token mode set before Ray is imported; Ray's side: ``ray/_private/node.py``, ``worker.py``)."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

START_WAIT_ENV = "EVALITA_RAY_START_WAIT_S"
DEFAULT_START_WAIT_S = 120.0
STARTUP_TIMEOUT = "timed out during startup"  # Ray's message when the raylet did not register in 30 s


class RayStartError(ConnectionError):
    """Ray could not be started or joined: the one line the user reads (an OSError: the CLI prints it as it is)."""


def start_wait_s() -> float:
    raw = os.environ.get(START_WAIT_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_START_WAIT_S
    except ValueError:
        value = -1.0
    if value < 0:
        raise RayStartError(f"{START_WAIT_ENV}={raw!r}: expected seconds (a number >= 0) to keep starting a local Ray")
    return value


def user_auth_token() -> str | None:
    """Where the user's Ray token is, as Ray looks for it (None: no token)."""
    if os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return "RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH", "").strip()
    if path:
        return path if Path(path).is_file() else None
    default = Path.home() / ".ray" / "auth_token"
    return str(default) if default.is_file() else None


def use_token_if_present(address: str | None) -> bool:
    """Joining ``address`` with ``RAY_AUTH_MODE`` unset and a token at hand: token mode, before Ray reads its
    configuration (at import). True when it was set here."""
    if address is None or "RAY_AUTH_MODE" in os.environ or user_auth_token() is None:
        return False
    if "ray" in sys.modules:  # Ray read its configuration already: the failure line says what to set
        return False
    os.environ["RAY_AUTH_MODE"] = "token"
    return True


def failure_line(err: BaseException, address: str | None, waited_s: float) -> str | None:
    """The one line for a Ray start-up failure we know, else None (the error goes up as it is)."""
    text = f"{type(err).__name__}: {err}"
    if address is None and STARTUP_TIMEOUT in text:
        return (f"a local Ray could not start within {waited_s:.0f} s (its raylet did not register in Ray's fixed "
                f"30 s, on every try; the machine is loaded): set {START_WAIT_ENV} to keep trying longer, or start Ray "
                "yourself with `ray start --head` and pass --backend-arg ray_address=127.0.0.1:6379")
    # A cluster refusing the token is, for ray.init, a ConnectionError naming no reason (InvalidAuthToken is logged).
    refused = "InvalidAuthToken" in text or "authentication" in text.lower()
    if address is not None and (isinstance(err, ConnectionError) or refused):
        token = user_auth_token()
        where = f"the token in {token}" if token else (
            "no token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)")
        return (f"the Ray cluster at {address} did not let this run join ({text.splitlines()[0]}; RAY_AUTH_MODE="
                f"{os.environ.get('RAY_AUTH_MODE', 'unset')}, {where}): a cluster with token authentication needs "
                "RAY_AUTH_MODE=token and its token in RAY_AUTH_TOKEN (`ray get-auth-token` on its head node)")
    return None


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A ``HOST:PORT`` address that nobody answers: one line now (Ray itself retries for minutes)."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return  # "auto", a ray:// client address...: Ray's own checks
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise RayStartError(f"no Ray cluster answered at {address} ({err.strerror or err}): start one with "
                            "`ray start --head` there, or fix --backend-arg ray_address / --ray-address") from None


def start_ray(address: str | None, **init_kwargs: Any) -> None:
    """``ray.init(address, **init_kwargs)``; a local start that times out is tried again until the start-up wait is
    spent; a failure we know ends in ``RayStartError`` (one line)."""
    use_token_if_present(address)
    if address is not None:
        check_reachable(address)
    import ray

    wait_s, started = start_wait_s(), time.monotonic()
    if address is None:  # Ray starts its workers 15 nicer than the driver: on a busy machine, replicas would lose
        init_kwargs.setdefault("_system_config", {"worker_niceness": 0})  # to one replica run in the driver itself
    while True:
        try:
            # "local": a Ray of our own, never one that another process left running here (its address in /tmp/ray).
            ray.init(address=address if address is not None else "local", **init_kwargs)
            return
        except Exception as err:
            waited = time.monotonic() - started
            line = failure_line(err, address, waited)
            if line is None:
                raise
            ray.shutdown()  # what the failed try started
            if address is None and STARTUP_TIMEOUT in str(err) and waited < wait_s:
                continue
            raise RayStartError(line) from None


def stop_ray() -> None:
    """``ray.shutdown()`` of the Ray this run started or joined; a local one's autoscaler monitor killed first: Ray
    stops the monitor after the GCS, and the monitor's SIGTERM handler then waits for the gone GCS until Ray kills it
    a second later (a local Ray of our own scales nothing; joined, this process started no monitor; Ray's side:
    ``ray/_private/node.py``, ``kill_all_processes``)."""
    import ray
    from ray._private import ray_constants, worker

    node = getattr(worker, "_global_node", None)
    monitor = getattr(ray_constants, "PROCESS_TYPE_MONITOR", None)
    if node is not None and monitor is not None and hasattr(node, "_kill_process_type"):
        node._kill_process_type(monitor, allow_graceful=False, check_alive=False)
    ray.shutdown()

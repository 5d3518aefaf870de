"""``openai-completions`` against ``vllm serve --data-parallel-size 2`` (two engines behind one
server, started here on 127.0.0.1): the client's ``concurrency`` keeps that many HTTP requests in
flight, so both engines run at once (the server's own gauges, polled while the run goes on),
and the results are those of a server with one engine.

Skipped without vLLM; ``.ci/run`` runs it in ``.venv-vllm``.
"""

from __future__ import annotations

import re
import threading
import urllib.request
from pathlib import Path


from .engine_helpers import API_KEY, assert_same_run, requires_vllm, run_in_process
from evalita_eval.backends import create_backend
from run_options import options_as_run_builds

pytestmark = requires_vllm
# MC tasks and a generative one, every prompt.
TASKS = ["te", "sa", "ls"]
CONFIG = {"limit": 4, "max_new_tokens": 16}


def engine_gauges(base_url: str, name: str) -> dict[str, float]:
    """One gauge of vLLM's /metrics per engine (label ``engine``), as the server reports it now."""
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/metrics", timeout=10) as resp:
        text = resp.read().decode("utf-8")
    pattern = rf'^{re.escape(name)}\{{(?=[^}}]*engine="(\d+)")[^}}]*\}} (\S+)$'
    got: dict[str, float] = {}
    for engine, value in re.findall(pattern, text, re.M):
        got[engine] = got.get(engine, 0.0) + float(value)
    return got


class GaugeWatcher:
    """Polls the server's ``vllm:num_requests_running`` per engine while a run goes on."""

    def __init__(self, base_url: str) -> None:
        self.base_url, self.seen = base_url, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.seen.append(engine_gauges(self.base_url, "vllm:num_requests_running"))
            self._stop.wait(0.01)

    def __enter__(self) -> "GaugeWatcher":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def most_running(self) -> float:
        return max(sum(s.values()) for s in self.seen)

    @property
    def both_busy(self) -> int:
        """Polls at which every engine was running a request."""
        return sum(len(s) == 2 and all(v > 0 for v in s.values()) for s in self.seen)


def _run(model: Path, url: str, out: Path, concurrency: int) -> tuple[dict, GaugeWatcher]:
    # One prompt per HTTP request: the requests in flight on the server are the client's concurrency.
    options = options_as_run_builds("openai-completions", model=str(model), base_url=url, api_key_env="EVALITA_TEST_OPENAI_KEY", concurrency=concurrency, batch_size=1)
    backend = create_backend("openai-completions", options)  # as `run` builds it
    try:
        with GaugeWatcher(url) as watcher:
            results = run_in_process(backend, "openai-completions", model, out, TASKS, **CONFIG)
    finally:
        backend.close()
    return results, watcher


def test_concurrency_keeps_both_engines_of_a_data_parallel_server_busy(tiny32: Path, vllm_server: str, vllm_dp_server: str,
                                                                       tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EVALITA_TEST_OPENAI_KEY", API_KEY)
    served_before = engine_gauges(vllm_dp_server, "vllm:request_success_total")
    assert sorted(served_before) == ["0", "1"]  # two engines behind the server
    one, _ = _run(tiny32, vllm_server, tmp_path / "one-engine", concurrency=4)
    serial, serial_seen = _run(tiny32, vllm_dp_server, tmp_path / "serial", concurrency=1)
    wide, wide_seen = _run(tiny32, vllm_dp_server, tmp_path / "wide", concurrency=4)
    # One request at a time never has more than one running, on either engine; four at a time
    # had both engines running at once, and never more than four requests.
    assert serial_seen.most_running <= 1 and serial_seen.both_busy == 0
    assert 2 <= wide_seen.most_running <= 4 and wide_seen.both_busy > 0, wide_seen.seen
    served = engine_gauges(vllm_dp_server, "vllm:request_success_total")
    assert all(served[e] > served_before[e] for e in ("0", "1")), (served_before, served)
    # The same scores, predictions and generations as one engine (log-likelihoods within float rounding).
    for got, out in ((serial, "serial"), (wide, "wide")):
        assert got["results"] == one["results"]
        assert assert_same_run(tmp_path / "one-engine", tmp_path / out) == 132  # every choice of every MC item (te, sa)

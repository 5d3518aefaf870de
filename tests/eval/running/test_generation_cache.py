"""Every finished generation is in the resume cache at once: kill -9 or Ctrl-C loses only the
requests in flight, a rerun reads back exactly those saved, and ends as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_eval.api import BackendOptions
from evalita_eval.backends import create_backend
from evalita_eval.running.cache import RequestCache
from evalita_eval.cli import main
from evalita_eval.running.runner import ModelInfo, Runner
from evalita_eval.run_config import RunSpec
from evalita_eval.sources.entries import select_entries
from evalita_eval.sources.folder import FolderSource

from paths import TEST_DATA

DATA = TEST_DATA / "build"
# 18 distinct generations (NER-fic, REL and LS: 3 documents x 2 prompts each), one row at a time
# (hf: batches of one), so they finish one by one and the batches of a resumed run are those of
# an uninterrupted one.
GEN_ARGS = ["--tasks", "ner_fic,rel,ls", "--max-length", "384", "--max-new-tokens", "48", "--no-progress"]
ONE_ROW = {"hf": ["--batch-size", "1"]}


def _cache_lines(path: Path) -> int:
    if not path.is_file():
        return 0
    # split("\n"), not splitlines(): a generation may hold U+2028 or U+0085 (JSON leaves them raw).
    return sum(1 for line in path.read_text("utf-8").split("\n") if line.endswith("}"))


def _command(model: Path, backend: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(model), "--data", str(DATA), "--backend", backend,
            *GEN_ARGS, *ONE_ROW[backend], "--output-dir", str(out)]


def _counts(stdout: str) -> tuple[int, int]:
    """(computed, read from the cache) of the run's last line."""
    line = stdout.strip().splitlines()[-1]
    computed = int(line.split(" requests computed")[0])
    cached = int(line.split(", ")[1].split(" read from the cache")[0])
    return computed, cached


@pytest.fixture(scope="module")
def uninterrupted(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """The output folder of an uninterrupted run per backend (made once)."""
    made: dict[str, Path] = {}

    def get(backend: str) -> Path:
        if backend not in made:
            out = tmp_path_factory.mktemp(f"{backend}-fresh")
            done = subprocess.run(_command(tiny_model, backend, out), capture_output=True, text=True)
            assert done.returncode == 0 and _counts(done.stdout) == (18, 0), done.stderr[-3000:]
            made[backend] = out
        return made[backend]

    return get


def _interrupt_and_resume(model: Path, backend: str, tmp_path: Path, sig: int, fresh: Path) -> tuple[int, str]:
    out = tmp_path / f"{backend}-{sig}"
    cache = out / "cache.jsonl"
    proc = subprocess.Popen(_paced(_command(model, backend, out), "-"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None and _cache_lines(cache) < 2:
        time.sleep(0.005)  # poll without taking a core from the run
    assert proc.poll() is None, "the run finished before it could be interrupted"
    os.kill(proc.pid, sig)
    _, stderr = proc.communicate()
    saved = _cache_lines(cache)
    # Every request finishes alone (one row at a time) and is saved as it does: the kill lands
    # after the second and before the last (a run that saved per call would show 0 or 4+ here).
    assert 2 <= saved < 18
    assert len(RequestCache(cache)) == saved  # every line whole

    resumed = subprocess.run(_command(model, backend, out), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _counts(resumed.stdout) == (18 - saved, saved)  # every saved generation read back, the rest computed

    assert json.loads((out / "results.json").read_text())["results"] == json.loads((fresh / "results.json").read_text())["results"]
    samples = sorted(p.name for p in (fresh / "samples").iterdir())
    assert len(samples) == 6
    for name in samples:
        assert (out / "samples" / name).read_text() == (fresh / "samples" / name).read_text()
    return saved, stderr


@pytest.mark.parametrize("backend", ["hf"])
def test_kill_9_keeps_every_finished_generation(tiny_model: Path, tmp_path: Path, backend: str, uninterrupted) -> None:
    _interrupt_and_resume(tiny_model, backend, tmp_path, signal.SIGKILL, uninterrupted(backend))


@pytest.mark.parametrize("backend", ["hf"])
def test_ctrl_c_says_what_was_kept(tiny_model: Path, tmp_path: Path, backend: str, uninterrupted) -> None:
    saved, stderr = _interrupt_and_resume(tiny_model, backend, tmp_path, signal.SIGINT, uninterrupted(backend))
    cache = tmp_path / f"{backend}-{int(signal.SIGINT)}" / "cache.jsonl"
    assert f"interrupted: {saved} generations of this run were saved in {cache} (0 from earlier runs)" in stderr
    assert stderr.rstrip().endswith("rerun the same command to resume")


# The real CLI in a subprocess, paced: the backend's generate_until waits PACE_S after each request
# it finished and keeps a ledger of them (unless "-"), written after the runner's on_result
# returned (if the runner gave one). Everything in the ledger when the process is killed was
# finished; the cache must hold at least as much. After the GATE_AFTER-th finished request it
# waits (up to GATE_S) for the test's signal: on a loaded machine the polling test could
# otherwise wake only after the last generation (it did, with the pace alone).
PACE_S = 0.1
GATE_AFTER, GATE_S = 2, 300
LEDGER_LAUNCHER = """
import signal, sys, time
# Ctrl-C as in a terminal: a test run as a background job (cmd &) starts with SIGINT ignored,
# which its children inherit, and Python then installs no KeyboardInterrupt handler.
signal.signal(signal.SIGINT, signal.default_int_handler)
from evalita_eval.backends.hf import HFBackend

ledger = sys.argv.pop(1)
done = []

def keeping_a_ledger(real):
    def generate_until(self, requests, on_result=None):
        def finished(index, text):
            if on_result is not None:
                on_result(index, text)
            if ledger != "-":
                with open(ledger, "a", encoding="utf-8") as fh:
                    fh.write(f"{index}\\n")
            done.append(index)
            time.sleep(%s)
            if len(done) == %d:  # the test signals the process here
                deadline = time.monotonic() + %d
                while time.monotonic() < deadline:
                    time.sleep(0.05)
        return real(self, requests, on_result=finished)
    return generate_until

HFBackend.generate_until = keeping_a_ledger(HFBackend.generate_until)
from evalita_eval.cli import main
main()
""" % (PACE_S, GATE_AFTER, GATE_S)


def _paced(command: list[str], ledger: str) -> list[str]:
    """``command`` (an ``evalita_eval.cli`` run) through the paced launcher."""
    return [sys.executable, "-c", LEDGER_LAUNCHER, ledger, *command[3:]]


@pytest.mark.parametrize("backend", ["hf"])
def test_cli_saves_each_generation_as_it_finishes(tiny_model: Path, tmp_path: Path, backend: str, uninterrupted) -> None:
    """SIGKILL once the second generation finished: every finished generation is in cache.jsonl, and
    the rerun computes only the rest. (Saving per call of batch_size x 4 requests loses them.)"""
    out, ledger = tmp_path / "out", tmp_path / "finished.txt"
    proc = subprocess.Popen(_paced(_command(tiny_model, backend, out), str(ledger)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None and (len(ledger.read_text().splitlines()) if ledger.is_file() else 0) < 2:
        time.sleep(0.005)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    finished, saved = len(ledger.read_text().splitlines()), _cache_lines(out / "cache.jsonl")
    assert 2 <= finished <= saved < 18, (finished, saved)
    resumed = subprocess.run(_command(tiny_model, backend, out), capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _counts(resumed.stdout) == (18 - saved, saved)
    fresh = uninterrupted(backend)
    assert json.loads((out / "results.json").read_text())["results"] == json.loads((fresh / "results.json").read_text())["results"]


class Interrupted:
    """The real hf backend, with Ctrl-C arriving after ``after`` generations of a call finished."""

    def __init__(self, backend, after: int) -> None:
        self.backend, self.after = backend, after

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def generate_until(self, requests, on_result=None):
        finished = []

        def report(index, text):
            on_result(index, text)
            finished.append(index)
            if len(finished) == self.after:
                raise KeyboardInterrupt

        return self.backend.generate_until(requests, on_result=report)


def test_generations_finished_before_the_end_of_a_call_are_saved(tiny_model: Path, tmp_path: Path) -> None:
    """Within one call (all of a prompt's requests), each generation is saved as it finishes."""
    backend = create_backend("hf", BackendOptions(str(tiny_model), dtype="float32", max_length=384, batch_size=1))
    entries = select_entries(["ner_fic"])
    config = RunSpec(model="m", data="data", max_new_tokens=48, progress=False)
    runner = Runner(Interrupted(backend, after=2), ModelInfo(str(tiny_model), None, "float32", "hf"), FolderSource(DATA), config, tmp_path)
    with pytest.raises(KeyboardInterrupt):
        runner.run(entries)
    assert _cache_lines(tmp_path / "cache.jsonl") == 2
    # The runner writes results.json (partial, with the time spent so far) when interrupted: the message says so.
    assert runner.interrupt_summary() == (f"2 generations of this run were saved in {tmp_path / 'cache.jsonl'} (0 from earlier runs); "
                                          f"{tmp_path / 'results.json'} is marked partial; rerun the same command to resume")
    assert json.loads((tmp_path / "results.json").read_text("utf-8"))["status"] == "partial"
    again = Runner(backend, ModelInfo(str(tiny_model), None, "float32", "hf"), FolderSource(DATA), config, tmp_path)
    assert again.earlier_generations == 2
    result = again.run(entries)
    assert (result.computed, result.cached) == (4, 2)


def test_interrupt_before_any_model_work(tiny_model: Path, tmp_path: Path, monkeypatch) -> None:
    import evalita_eval.backends as backends

    def interrupted(*_args, **_kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(backends, "create_backend", interrupted)
    result = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "ner_fic", "--output-dir", str(tmp_path)])
    assert result.exit_code == 130 and "interrupted: nothing was computed yet" in result.output

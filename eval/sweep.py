"""``evalita-eval sweep FILE``: each run (eval/sweep_runs.py) the real ``run --config`` of its keys in its own process,
as a Ray task, then one report (docs/parallel.md#sweeps)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from .record import RecordError, read_run
from .sweep_runs import SweepRun, complete_folder, run_reservation

# Where a run the sweep started writes its folder's path (eval/cli/run.py): read there, never from its console.
FOLDER_FILE_ENV = "EVALITA_SWEEP_FOLDER_FILE"


# Seconds between two looks at a running run's folder (its task) and at the runs' news (the driver).
STATUS_POLL_S = 1.0
# Times a run whose node is lost is started again elsewhere before it is reported failed.
NODE_RETRIES = 2
# A running run's line is printed again when a task finishes, else at most this often when its count moved.
STATUS_EVERY_S = 60.0


class CacheLines:
    """The lines of a run's growing ``cache.jsonl``, counted on the bytes added since the last look."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.lines = path, 0, 0

    def count(self) -> int:
        try:
            with open(self.path, "rb") as fh:
                if fh.seek(0, 2) < self.offset:  # replaced by a shorter file: count again
                    self.offset = self.lines = 0
                fh.seek(self.offset)
                added = fh.read()
        except OSError:
            return self.lines
        self.offset, self.lines = self.offset + len(added), self.lines + added.count(b"\n")
        return self.lines


def standing(folder: Path, cache: CacheLines) -> tuple[int, str]:
    """Where a running run stands, from its folder: (tasks finished, 'running: 1 of 2 tasks finished (te), 34 requests
    saved'). Unreadable or partial files read as nothing finished yet."""
    try:  # results.json only: the samples of the task running are being written
        record = read_run(folder, partial=True, samples=False) if (folder / "results.json").is_file() else None
    except RecordError:
        record = None
    finished = list(record.results) if record is not None else []
    planned = len(record.planned or []) if record is not None else 0
    names = f" ({', '.join(finished)})" if finished else ""
    tasks = f"{len(finished)} of {planned} tasks finished{names}, " if planned else ""
    return len(finished), f"running: {tasks}{cache.count()} requests saved"


class Board:
    """A Ray actor that holds the latest standing each run's task reported: the driver prints it."""

    def __init__(self) -> None:
        self.news: dict[int, tuple[int, str]] = {}

    def report(self, run: int, tasks_finished: int, text: str) -> None:
        self.news[run] = (tasks_finished, text)

    def snapshot(self) -> dict[int, tuple[int, str]]:
        return dict(self.news)


def folder_of(told: Path) -> Path | None:
    """The folder a run writes to, as it wrote it in ``told`` (its FOLDER_FILE_ENV, eval/cli/run.py); None before."""
    text = told.read_text("utf-8") if told.is_file() else ""
    return Path(text) if text else None


def die_with_parent() -> None:
    """In a run's process before it starts (Linux): killed when the Ray worker that started it dies (its node lost), so
    the task's retry on another node holds the run folder's lock alone and resumes from the cache."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG


def run_one(config: str, log: str, cwd: str, board: Any = None, run: int = 0,
            paths: dict[str, str] | None = None) -> tuple[int, str, str | None]:
    """``run --config CONFIG`` in its own process (in ``cwd``, the driver's folder), its console appended to ``log``:
    (exit code, last line, the run's folder or None). Tells ``board`` (a ``Board`` actor) that it started, then where
    it stands as it goes. ``paths`` (what -> path) that this node cannot read: one line."""
    import ray

    from .replicas.resources import node_name, unreadable

    problem = unreadable(paths or {})
    if problem is not None:
        return 1, problem, None
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    told = Path(log).with_name(f".{Path(log).name}.folder")  # beside the log: a retry on another node rewrites it
    told.unlink(missing_ok=True)
    with open(log, "a", encoding="utf-8") as out:
        child = subprocess.Popen([sys.executable, "-m", "evalita_eval.cli", "run", "--config", config, "--no-progress"],
                                 stdout=out, stderr=subprocess.STDOUT, cwd=cwd if os.path.isdir(cwd) else None,
                                 preexec_fn=die_with_parent, env={**os.environ, FOLDER_FILE_ENV: str(told)})
        if board is not None:  # waited for: the driver sees "started" before it sees the end
            started = f"started on {socket.gethostname()}, node {node_name()} (pid {child.pid})"
            ray.get(board.report.remote(run, 0, started))
        cache, last, folder = None, "", None
        while True:
            try:
                code = child.wait(timeout=STATUS_POLL_S)
                break
            except subprocess.TimeoutExpired:
                folder = folder or folder_of(told)
                if folder is None:
                    continue
                cache = cache or CacheLines(folder / "cache.jsonl")
                finished, text = standing(folder, cache)
                if board is not None and text != last:
                    board.report.remote(run, finished, text)
                    last = text
    lines = Path(log).read_text("utf-8", errors="replace").strip().splitlines()
    folder = folder_of(told)
    return code, lines[-1] if lines else "", None if folder is None else str(folder)


class Lines:
    """The driver's console: a line per run as it stands (docs/parallel.md#sweeps)."""

    def __init__(self, runs: list[SweepRun], echo: Callable[[str], None]) -> None:
        self.runs, self.echo = runs, echo
        self.shown: dict[int, tuple[int, str, float]] = {}  # run -> (tasks finished, text, when) last printed

    def say(self, run: int, text: str) -> None:
        self.echo(f"[{run + 1}/{len(self.runs)}] {self.runs[run].name}: {text}")

    def news(self, board: Any, running: set[int]) -> None:
        """The ``running`` runs' standing as their tasks last reported it, where it moved."""
        import ray

        now = time.monotonic()
        for run, (finished, text) in sorted(ray.get(board.snapshot.remote()).items()):
            if run not in running:  # ended: its last report may arrive after its end
                continue
            before = self.shown.get(run)
            if before is None or (text != before[1] and (finished != before[0] or now - before[2] >= STATUS_EVERY_S
                                                          or text.startswith("started"))):  # started again: always said
                self.say(run, text)
                self.shown[run] = (finished, text, now)


def reservations(runs: list[SweepRun], address: str | None) -> list[dict[str, float]]:
    """Each run's Ray reservation (``run_reservation``), checked against this machine's CPUs and GPUs (a local Ray) or
    the cluster's: one line naming the run before any run starts."""
    from .replicas.resources import check_room, cluster_resources, machine_resources

    have = cluster_resources() if address else machine_resources()
    where = f"the Ray cluster at {address}" if address else "this machine"
    held = [run_reservation(run.spec, have["GPU"] > 0) for run in runs]
    for run, each in zip(runs, held):
        check_room(f"{run.where}: its replicas and GPUs", each["num_cpus"], each["num_gpus"], have, where)
    return held


def run_paths(run: SweepRun, config: Path) -> dict[str, str]:
    """What a run's node must read at the driver's paths: its config file, its data folder, a model folder."""
    paths = {"run config": str(config)}
    if run.spec.data:
        paths["data folder"] = str(Path(run.spec.data).resolve())
    if Path(run.spec.model).exists():
        paths["model folder"] = str(Path(run.spec.model).resolve())
    return paths


def write_configs(runs: list[SweepRun], out: Path) -> list[Path]:
    """Each run's keys as the ``run --config`` file its task runs (``OUT/runs/<n>.yaml``)."""
    import yaml

    (out / "runs").mkdir(parents=True, exist_ok=True)
    paths = []
    for run in runs:
        values = run.spec.model_dump(mode="json", exclude_unset=True)  # the keys given, as a --config file holds them
        if run.output_dir is not None:
            values["output_dir"] = str(run.output_dir)
        path = out / "runs" / f"{run.number}.yaml"
        path.write_text(yaml.safe_dump(values, sort_keys=False, allow_unicode=True), "utf-8")
        paths.append(path.resolve())
    return paths


def run_sweep(runs: list[SweepRun], echo: Callable[[str], None], address: str | None,
              out: Path) -> dict[int, tuple[str, Path | None]]:
    """Every run not yet complete as a Ray task, said as it goes (``Lines``): run index -> (state, its folder)."""
    from .replicas.ray_start import start_ray, stop_ray, use_token_if_present

    use_token_if_present(address)  # before Ray reads its configuration
    import ray

    held = reservations(runs, None) if address is None else []  # checked before Ray starts here
    started_ray = not ray.is_initialized()
    if started_ray:
        start_ray(address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    # A run whose node is lost is started again on another (Ray retries the task; the run resumes from its cache).
    task = ray.remote(max_retries=NODE_RETRIES)(run_one)
    states: dict[int, tuple[str, Path | None]] = {}
    pending: dict[Any, int] = {}
    lines = Lines(runs, echo)
    try:
        held = held or reservations(runs, address)
        configs = write_configs(runs, out)
        # On the driver's node: the news outlives any other node.
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        board = ray.remote(Board).options(num_cpus=0, scheduling_strategy=here).remote()
        for i, run in enumerate(runs):
            done = complete_folder(run)
            if done is not None:
                states[i] = ("complete (earlier)", done)
                lines.say(i, f"already complete in {done}")
                continue
            log = (out / "logs" / f"{run.number}.log").resolve()
            paths = run_paths(run, configs[i])
            pending[task.options(**held[i]).remote(str(configs[i]), str(log), os.getcwd(), board, i, paths)] = i
            lines.say(i, f"queued -> {run.output_dir or 'its run-id folder under results/'} (log {log})")
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=STATUS_POLL_S)
            lines.news(board, set(pending.values()))
            for ref in ready:
                i = pending.pop(ref)
                try:
                    code, last, folder = ray.get(ref)
                except ray.exceptions.RayError as err:  # its node lost NODE_RETRIES + 1 times: what it saved is kept
                    code, folder = -1, None
                    last = f"its node was lost ({type(err).__name__}); rerun the sweep to resume it"
                states[i] = ("complete" if code == 0 else f"failed (exit {code}): {last}",
                             None if folder is None else Path(folder))
                lines.say(i, f"{states[i][0]} ({len(runs) - len(pending)}/{len(runs)} done; in {folder})")
    finally:
        if started_ray:
            stop_ray()
    return states


def report_groups(runs: list[SweepRun], states: dict[int, tuple[str, Path | None]],
                  out: Path) -> dict[Path, list[Path]]:
    """The results files of the complete runs, by the folder of their report: OUT, or one per prompt set
    (OUT/prompts-p1-p3, OUT/prompts-all) when the runs evaluate different prompts (docs/parallel.md#sweeps)."""
    groups: dict[str, list[Path]] = {}
    for i, (state, folder) in sorted(states.items()):
        if state.startswith("complete") and folder is not None:
            groups.setdefault("-".join(runs[i].spec.prompts or ["all"]), []).append(folder / "results.json")
    if len(groups) == 1:
        return {out: next(iter(groups.values()))}
    return {out / f"prompts-{key}": paths for key, paths in groups.items()}


def report_sweep(runs: list[SweepRun], out: Path, address: str | None, echo: Callable[[str], None]) -> int:
    """Run the sweep, then the report of its complete runs (``report_groups``); the number of runs not complete."""
    from .reporting.report import write_report

    for run in runs:
        for note in run.notes:
            echo(f"{run.where}: {note}")
    states = run_sweep(runs, echo, address, out)
    groups = report_groups(runs, states, out)
    if len(groups) > 1:
        echo(f"the runs evaluate different prompts: one report per prompt set ({len(groups)})")
    for folder, paths in groups.items():
        folder.mkdir(parents=True, exist_ok=True)
        written = write_report(paths, folder)
        echo(f"report of {len(paths)} runs: " + ", ".join(str(p) for p in written))
    return len(runs) - sum(len(paths) for paths in groups.values())

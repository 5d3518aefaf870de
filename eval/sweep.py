"""``evalita-eval sweep FILE``: many runs (models x settings ...) as Ray tasks, then one report.

FILE (YAML or JSON) is a list of runs, or ``{"defaults": {...}, "runs": [...]}`` whose
defaults every run extends. A run names what ``evalita-eval run`` takes: ``model`` (required),
``data`` or ``hub_org``, ``backend``, ``backend_args`` (a mapping: ``--backend-arg K=V``),
``setting``, ``tasks``, ``prompts``, ``num_fewshot``, ``limit``, ``batch_size``, ``device``,
``max_new_tokens``, ``output_dir`` ... (any ``run`` option, underscores for dashes; ``true``
for a flag). Each run is the real ``run`` command in its own process (a Ray task reserving
the run's GPUs: ``tensor_parallel_size x data_parallel_size`` for vllm, one for a CUDA
``hf`` run), writing its folder exactly as ``run`` would, and its console into
``OUTPUT_DIR/sweep.log``. A run whose ``results.json`` is complete is not started again;
any other resumes from its cache. A failed run is reported and the others go on. The driver
prints a line per run as it is queued, starts, finishes a task and ends (``Lines``, from what
each run's task reports to a ``Board`` actor); a run's folder is locked while it runs, so two
sweeps never compute one run at once.
"""

from __future__ import annotations

import fcntl
import json
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

# Keys of a run that are not `run` options.
_OWN_KEYS = {"backend_args", "name"}


@dataclass(frozen=True)
class SweepRun:
    name: str
    argv: tuple[str, ...]  # the `evalita-eval run` arguments
    output_dir: Path
    gpus: float


def load_sweep(path: Path) -> list[SweepRun]:
    """The runs of a sweep file; a ValueError naming the file and the run for anything else."""
    import yaml

    try:
        doc = yaml.safe_load(path.read_text("utf-8"))  # JSON is YAML too
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise ValueError(f"{path}: not a readable YAML or JSON file ({' '.join(str(err).split())[:200]})") from None
    defaults: dict[str, Any] = {}
    if isinstance(doc, dict) and set(doc) <= {"defaults", "runs"}:
        defaults, doc = doc.get("defaults") or {}, doc.get("runs")
    if not isinstance(doc, list) or not doc or not isinstance(defaults, dict):
        raise ValueError(f"{path}: expected a non-empty list of runs, or {{defaults: {{...}}, runs: [...]}}")
    runs = []
    for n, raw in enumerate(doc, 1):
        if not isinstance(raw, dict) or "model" not in {**defaults, **raw}:
            raise ValueError(f"{path}: run {n} is not a mapping with a model")
        runs.append(sweep_run({**defaults, **raw}, n, path))
    dirs = [r.output_dir for r in runs]
    if len(set(dirs)) != len(dirs):
        twice = next(d for d in dirs if dirs.count(d) > 1)
        raise ValueError(f"{path}: two runs write to {twice}; give them different settings or output_dir")
    return runs


def sweep_run(spec: dict[str, Any], n: int, path: Path) -> SweepRun:
    """One run of the file as `run` arguments, its folder (as `run` names it) and its GPUs."""
    from .naming import model_slug, setting_slug

    argv: list[str] = []
    for key, value in spec.items():
        if key in _OWN_KEYS or value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        else:
            argv += [flag, ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    backend_args = spec.get("backend_args") or {}
    if not isinstance(backend_args, dict):
        raise ValueError(f"{path}: run {n}: backend_args must be a mapping of NAME: VALUE")
    for key, value in backend_args.items():
        argv += ["--backend-arg", f"{key}={value}"]
    output_dir = spec.get("output_dir") or str(Path("results") / model_slug(str(spec["model"]), spec.get("revision"))
                                               / setting_slug(spec.get("setting", "loglikelihood"), bool(spec.get("constrained")),
                                                              int(spec.get("num_fewshot", 0)), spec.get("split")))
    if "output_dir" not in spec:
        argv += ["--output-dir", output_dir]
    return SweepRun(str(spec.get("name") or f"{spec['model']} {Path(output_dir).name}"), tuple(argv), Path(output_dir), run_gpus(spec))


def run_gpus(spec: dict[str, Any]) -> float:
    """GPUs one run reserves: vllm's tensor x data parallel sizes, one per hf replica on CUDA, else none."""
    args = spec.get("backend_args") or {}
    replicas = int(args.get("data_parallel_size", spec.get("data_parallel_size", 1)))
    if spec.get("backend") == "vllm":
        return float(int(args.get("tensor_parallel_size", spec.get("tensor_parallel_size", 1))) * replicas)
    if str(spec.get("device", "")).startswith("cuda") or spec.get("device") == "auto":
        return float(replicas)
    return 0.0


def is_complete(output_dir: Path) -> bool:
    try:
        return json.loads((output_dir / "results.json").read_text("utf-8")).get("status") == "complete"
    except (OSError, ValueError, AttributeError):
        return False


# Seconds between two looks at a running run's folder (its task) and at the runs' news (the driver).
STATUS_POLL_S = 1.0
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
        self.offset += len(added)
        self.lines += added.count(b"\n")
        return self.lines


def standing(folder: Path, cache: CacheLines) -> tuple[int, str]:
    """Where a running run stands, from its folder: (tasks finished, 'running: 1 of 2 tasks finished
    (te), 34 requests saved'). Unreadable or partial files read as nothing finished yet."""
    try:
        doc = json.loads((folder / "results.json").read_text("utf-8"))
        finished = [t for t in doc.get("results") or {}]
        planned = len(doc.get("tasks", {}).get("planned") or [])
    except (OSError, ValueError, AttributeError):
        finished, planned = [], 0
    names = f" ({', '.join(finished)})" if finished else ""
    tasks = f"{len(finished)} of {planned} tasks finished{names}, " if planned else ""
    return len(finished), f"running: {tasks}{cache.count()} requests saved"


# Held (flock) by a run's task and its `run` process while it runs: two never compute one folder at once.
LOCK_FILE = ".sweep.lock"
LOCKED = 75  # the exit code reported for a run whose folder another process is running (EX_TEMPFAIL)


class Board:
    """A Ray actor that holds the latest standing each run's task reported: the driver prints it."""

    def __init__(self) -> None:
        self.news: dict[int, tuple[int, str]] = {}

    def report(self, run: int, tasks_finished: int, text: str) -> None:
        self.news[run] = (tasks_finished, text)

    def snapshot(self) -> dict[int, tuple[int, str]]:
        return dict(self.news)


def run_one(argv: tuple[str, ...], output_dir: str, board: Any = None, run: int = 0) -> tuple[int, str]:
    """The `run` command in its own process, its console appended to OUTPUT_DIR/sweep.log: (exit code,
    last line). Tells ``board`` (a ``Board`` actor) that it started, then where it stands as it goes."""
    import ray

    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_FILE, "a") as lock, open(folder / "sweep.log", "a", encoding="utf-8") as log:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return LOCKED, f"{folder} is being run by another process (another sweep, or a run left by a dead task): not started"
        # The run holds the lock too (the fd passed on): a run outliving this task still keeps a second one out.
        child = subprocess.Popen([sys.executable, "-m", "evalita_eval.cli", "run", "--no-progress", *argv], stdout=log, stderr=subprocess.STDOUT,
                                 pass_fds=(lock.fileno(),))
        if board is not None:  # waited for: the driver sees "started" before it sees the end
            ray.get(board.report.remote(run, 0, f"started on {socket.gethostname()} (pid {child.pid})"))
        cache, last = CacheLines(folder / "cache.jsonl"), ""
        while True:
            try:
                code = child.wait(timeout=STATUS_POLL_S)
                break
            except subprocess.TimeoutExpired:
                finished, text = standing(folder, cache)
                if board is not None and text != last:
                    board.report.remote(run, finished, text)
                    last = text
    lines = (folder / "sweep.log").read_text("utf-8", errors="replace").strip().splitlines()
    return code, lines[-1] if lines else ""


class Lines:
    """The driver's console: a line per run when it is queued, starts, finishes a task, ends (and at
    most every ``STATUS_EVERY_S`` while its count of saved requests moves)."""

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
            if before is None or (text != before[1] and (finished != before[0] or now - before[2] >= STATUS_EVERY_S)):
                self.say(run, text)
                self.shown[run] = (finished, text, now)


def run_sweep(runs: list[SweepRun], echo: Callable[[str], None], address: str | None = None) -> dict[str, str]:
    """Every run not yet complete as a Ray task; a line per run as it is queued, starts, goes on and
    ends. Returns run name -> state."""
    from .replicas.ray_start import start_ray, use_token_if_present

    use_token_if_present(address)  # before Ray reads its configuration
    import ray

    started_ray = not ray.is_initialized()
    if started_ray:
        start_ray(address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    task = ray.remote(run_one)
    states: dict[str, str] = {}
    pending: dict[Any, int] = {}
    lines = Lines(runs, echo)
    try:
        board = ray.remote(Board).options(num_cpus=0).remote()
        for i, run in enumerate(runs):
            if is_complete(run.output_dir):
                states[run.name] = "complete (earlier)"
                lines.say(i, f"already complete in {run.output_dir}")
                continue
            pending[task.options(num_cpus=1, num_gpus=run.gpus).remote(run.argv, str(run.output_dir), board, i)] = i
            lines.say(i, f"queued -> {run.output_dir}")
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=STATUS_POLL_S)
            lines.news(board, set(pending.values()))
            for ref in ready:
                i = pending.pop(ref)
                code, last = ray.get(ref)
                states[runs[i].name] = "complete" if code == 0 else f"failed (exit {code}): {last}"
                lines.say(i, f"{states[runs[i].name]} ({len(runs) - len(pending)}/{len(runs)} done; log {runs[i].output_dir / 'sweep.log'})")
    finally:
        if started_ray:
            ray.shutdown()
    return states


def report_sweep(runs: list[SweepRun], out: Path, address: str | None, echo: Callable[[str], None]) -> int:
    """Run the sweep, then write one report (reporting/report.py, as `evalita-eval report`) of
    every complete run; the number of runs that are not complete."""
    from .reporting.report import write_report

    states = run_sweep(runs, echo, address)
    complete = [r.output_dir / "results.json" for r in runs if states.get(r.name, "").startswith("complete")]
    if complete:
        written = write_report(complete, out, echo=echo)
        echo(f"report of {len(complete)} runs: " + ", ".join(str(p) for p in written))
    return len(runs) - len(complete)

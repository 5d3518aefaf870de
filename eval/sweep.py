"""``evalita-eval sweep FILE``: many runs (models x settings ...) as Ray tasks, then one report.

FILE (YAML or JSON) is a list of runs, or ``{"defaults": {...}, "runs": [...]}`` whose
defaults every run extends. A run names what ``evalita-eval run`` takes: ``model`` (required),
``data`` or ``hub_org``, ``backend``, ``backend_args`` (a mapping: ``--backend-arg K=V``),
``setting``, ``tasks``, ``prompts``, ``num_fewshot``, ``limit``, ``batch_size``, ``device``,
``max_new_tokens``, ``output_dir`` ... (any ``run`` option, underscores for dashes; ``true``
for a flag). Each run is the real ``run`` command in its own process (a Ray task reserving
the run's GPUs: ``tensor_parallel_size x data_parallel_size`` for vllm, one for a CUDA
``hf``/``fast`` run), writing its folder exactly as ``run`` would, and its console into
``OUTPUT_DIR/sweep.log``. A run whose ``results.json`` is complete is not started again;
any other resumes from its cache. A failed run is reported and the others go on.
"""

from __future__ import annotations

import json
import subprocess
import sys
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
    """GPUs one run reserves: vllm's tensor x data parallel sizes, one per hf/fast replica on CUDA, else none."""
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


def run_one(argv: tuple[str, ...], output_dir: str) -> tuple[int, str]:
    """The `run` command in its own process, its console appended to OUTPUT_DIR/sweep.log: (exit code, last line)."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "sweep.log", "a", encoding="utf-8") as log:
        done = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--no-progress", *argv], stdout=log, stderr=subprocess.STDOUT)
    lines = (folder / "sweep.log").read_text("utf-8", errors="replace").strip().splitlines()
    return done.returncode, lines[-1] if lines else ""


def run_sweep(runs: list[SweepRun], echo: Callable[[str], None], address: str | None = None) -> dict[str, str]:
    """Every run not yet complete as a Ray task; a line per run as it starts and ends. Returns run name -> state."""
    import ray

    started_ray = not ray.is_initialized()
    if started_ray:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    task = ray.remote(run_one)
    states: dict[str, str] = {}
    pending: dict[Any, SweepRun] = {}
    try:
        for i, run in enumerate(runs, 1):
            if is_complete(run.output_dir):
                states[run.name] = "complete (earlier)"
                echo(f"[{i}/{len(runs)}] {run.name}: already complete in {run.output_dir}")
                continue
            pending[task.options(num_cpus=1, num_gpus=run.gpus).remote(run.argv, str(run.output_dir))] = run
            echo(f"[{i}/{len(runs)}] {run.name}: queued -> {run.output_dir}")
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            run = pending.pop(ref)
            code, last = ray.get(ref)
            states[run.name] = "complete" if code == 0 else f"failed (exit {code}): {last}"
            echo(f"{run.name}: {states[run.name]} ({len(runs) - len(pending)}/{len(runs)} done; log {run.output_dir / 'sweep.log'})")
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

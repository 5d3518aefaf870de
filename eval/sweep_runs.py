"""The runs of a sweep file (eval/sweep.py runs them), each a typed ``RunSpec`` (the keys of ``run --config``), and
whether a run is complete: the identity its folder records equal to the one its keys give (docs/parallel.md#sweeps)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .record import RecordError, RunRecord, read_run
from .run_config import RunSpec, RunSpecError, backend_options, build_spec


@dataclass(frozen=True)
class SweepRun:
    name: str
    number: int  # its place in the file, from 1
    spec: RunSpec
    output_dir: Path | None  # given, resolved; None: `run`'s default folder (named by the run id)
    notes: tuple[str, ...] = ()  # said before the sweep starts (lm-eval task names read as ours)

    @property
    def where(self) -> str:
        return f"run {self.number} ({self.name})"


def load_sweep(path: Path) -> list[SweepRun]:
    """The runs of a sweep file, each checked as ``run --config`` checks its file; one line naming the file, the run and
    the key otherwise (a ValueError)."""
    from .config_file import load_file
    from .naming import setting_slug

    doc = load_file(path)  # its ConfigFileError is a ValueError naming the file
    defaults: Any = {}
    if isinstance(doc, dict) and set(doc) <= {"defaults", "runs"}:
        defaults, doc = doc.get("defaults") or {}, doc.get("runs")
    if not isinstance(doc, list) or not doc or not isinstance(defaults, dict):
        raise ValueError(f"{path}: expected a non-empty list of runs, or {{defaults: {{...}}, runs: [...]}}")
    runs = []
    for n, raw in enumerate(doc, 1):
        if not isinstance(raw, dict) or "model" not in {**defaults, **raw}:
            raise ValueError(f"{path}: run {n} is not a mapping with a model")
        values = {**defaults, **raw}
        name = values.pop("name", None)
        where = f"{path}: run {n}" + (f" ({name})" if name is not None else "")
        if name is not None and not isinstance(name, str | int):
            raise RunSpecError(f"{where}: key name: expected a string, got {name!r}")
        spec, notes = build_spec(values, where)
        folder = Path(spec.output_dir).resolve() if spec.output_dir else None
        slug = folder.name if folder else setting_slug(spec.setting, spec.constrained, spec.num_fewshot, spec.split)
        given = None if name is None else str(name)
        runs.append(SweepRun(given or f"{spec.model} {slug}", n, spec, folder, tuple(notes)))
    unnamed = [run.name for run, raw in zip(runs, doc) if "name" not in {**defaults, **raw}]
    # Runs without a name that would share one (same model and setting, other keys): told apart by their place.
    runs = [replace(run, name=f"{run.name} #{run.number}") if "name" not in {**defaults, **raw}
            and unnamed.count(run.name) > 1 else run for run, raw in zip(runs, doc)]
    check_runs(path, runs)
    return runs


def run_reservation(spec: RunSpec, gpus_there: bool) -> dict[str, float]:
    """What a run's Ray task reserves: a CPU per replica and its replicas' GPUs as its backend declares them
    (``Backend.reservation``). A run without ``device`` takes CUDA where there is one (``run``'s default), so it
    reserves its GPUs wherever the Ray it runs on has GPUs (``gpus_there``)."""
    from .backends import get_backend_class
    from .replicas import replica_settings

    replicas, _, one = replica_settings(backend_options(spec, spec.device or ("cuda" if gpus_there else "cpu")))
    gpus = get_backend_class(spec.backend).reservation(one)["num_gpus"]
    return {"num_cpus": float(replicas), "num_gpus": gpus * replicas}


def check_runs(path: Path, runs: list[SweepRun]) -> None:
    """Two runs with one name, one folder (after resolving) or the same keys are refused, naming both."""
    seen: dict[Any, SweepRun] = {}
    for run in runs:
        same = run.spec.model_dump(exclude={"output_dir", "progress"})
        if run.output_dir is not None:
            keys = [("folder", run.output_dir, f"both write to {run.output_dir}")]
        else:
            keys = [("same", json.dumps(same, sort_keys=True, default=str), "are the same run (the same keys)")]
        keys.append(("name", run.name, "are both named " + repr(run.name)))
        for kind, key, why in keys:
            first = seen.setdefault((kind, key), run)
            if first is not run:
                raise ValueError(f"{path}: runs {first.number} and {run.number} {why}; give them different names, "
                                 "output_dir or keys")


def entry_identity(spec: RunSpec) -> dict[str, Any]:
    """What the identity of a run of ``spec`` holds beyond its model (running/identity.py), from its keys."""
    from .running.identity import run_identity

    identity = run_identity({}, spec)
    return {k: v for k, v in identity.items() if k not in _NOT_ENTRY_KEYS}


# What a run's identity holds that its entry's keys do not give: the model's record (compared on its own) and the
# chat template (read from the tokenizer when the run starts).
_NOT_ENTRY_KEYS = ("model", "chat_template")


def identity_difference(record: RunRecord, spec: RunSpec) -> str | None:
    """Why the checked run ``record`` (record/read.py) is not a complete run of ``spec`` (None: it is). Every input
    its identity records beyond the model (on both sides: a thinking or BERTScore entry only one side has differs)
    is compared with the one ``spec`` gives; its status alone is never believed."""
    from .replicas import REPLICA_OPTIONS
    from .running.identity import first_difference

    if record.partial:
        return "not complete"
    identity = record.identity  # hashes to the run id: the reader checks it (record/build.py check_identity)
    if identity is None:
        return "no run identity"
    model = identity["model"] if "model" in identity else None
    if not isinstance(model, dict):
        return "no model in its run identity"
    recorded = {k: v for k, v in identity.items() if k not in _NOT_ENTRY_KEYS}
    if difference := first_difference(recorded, entry_identity(spec)):
        return difference
    own = {k: v for k, v in spec.backend_args.items() if k not in REPLICA_OPTIONS}
    wanted = {"name_or_path": spec.model, "revision": spec.revision, "backend": spec.backend, **own}
    if spec.dtype != "auto":
        wanted["dtype"] = spec.dtype
    if difference := first_difference({k: model.get(k) for k in wanted}, wanted, "model."):
        return difference
    if spec.tasks:
        from .sources.entries import select_entries

        try:
            missing = [e.name for e in select_entries(spec.tasks) if e.name not in record.results]
        except KeyError:  # a task no one registered: `run` says so when the run is started
            return "unknown tasks"
        if missing:
            return f"tasks {', '.join(missing)} not evaluated"
    return None


def complete_folder(run: SweepRun) -> Path | None:
    """The folder holding a complete run of ``run`` (its recorded identity equal to the run's), or None: its output_dir,
    else one of ``run``'s default folders of its model and setting."""
    from .naming import model_slug, setting_slug

    spec = run.spec
    stem = setting_slug(spec.setting, spec.constrained, spec.num_fewshot, spec.split)
    default = Path("results") / model_slug(spec.model, spec.revision)
    for folder in [run.output_dir] if run.output_dir is not None else sorted(default.glob(f"{stem}-*")):
        if not (folder / "results.json").is_file():
            continue
        try:
            record = read_run(folder, partial=True)  # checked, samples too: a damaged run is computed again
        except RecordError:
            continue
        named = run.output_dir is not None or folder.name.endswith(f"-{record.run_id}")
        if named and identity_difference(record, run.spec) is None:
            return folder
    return None

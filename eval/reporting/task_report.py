"""One task's multi-prompt table across runs, its headline metric and the rank basis; the order of tasks; what the runs
recorded of each task (results.json ``task_versions``), read instead of the registry installed now (docs/evaluator.md;
a malformed record is refused by the record's schema before it gets here)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..record import RecordedMetric, RecordError
from ..record.model import RunRecord, TaskRecord
from . import stats
from ..metrics import higher_is_better
from .tables import PERCENT, ScoreRow, TaskTable, TextTable, build_tables, natural_key, resolve_scale


def headline_metric(task: str, available: Sequence[str], runs: Sequence[RunRecord] = ()) -> tuple[str, str | None]:
    """(metric, note): the headline the runs recorded (recorded_headline); for files without
    that record, the first metric of the installed task's declaration, else the first reported one."""
    from evalita_data.registry import task_of_entry

    recorded, notes = recorded_headline(task, runs, available)
    if recorded is not None:
        return recorded, "; ".join(notes) or None
    spec = task_of_entry(task)
    if spec is not None:
        declared = spec.metrics[0].name
        if declared in available:
            return declared, None
        return available[0], (f"headline metric {declared!r} of task {spec.id} not in the results; using "
                              f"{available[0]!r}")
    return available[0], f"task {task!r} is not in the registry; headline metric = first reported, {available[0]!r}"


def task_order(tasks: set[str]) -> list[str]:
    """Registry order (the paper's), entries of one task together; unknown names last."""
    from evalita_data.registry import task_ids, task_of_entry

    rank = {t: i for i, t in enumerate(task_ids())}

    def key(name: str) -> tuple[int, list]:
        spec = task_of_entry(name)
        return (rank[spec.id] if spec is not None else len(rank), natural_key(name))

    return sorted(tasks, key=key)


@dataclass
class TaskReport:
    table: TaskTable
    metric: str
    # (model, prompt) -> bootstrap of the metric, in percent; empty when omitted.
    cells: dict[tuple[str, str], stats.BootstrapResult] = field(default_factory=dict)
    # model -> bootstrap scores of AvgP (percent), when every cell was bootstrapped.
    avg_scores: dict[str, np.ndarray] = field(default_factory=dict)
    rank_basis: str = "the per-prompt scores (Welch t-test across prompts; no bootstrap)"
    items: TextTable | None = None  # n, limit, baselines, unparsed k / n and answer rules per model
    higher_is_better: bool = True  # the headline metric's direction, as the runs recorded it (else as declared now)


def build_task_report(task: str, runs: Sequence[RunRecord]) -> TaskReport:
    task_runs = [r for r in runs if task in r.results]
    available = list(dict.fromkeys(m for r in task_runs for p in r.results[task].values()
                                   for m in p if m not in ("n", "unparsed")))
    if not available:
        raise RecordError(f"task {task!r}: no metric in any results file")
    metric, note = headline_metric(task, available, task_runs)
    rows = []
    for r in task_runs:
        for prompt, metrics in r.results[task].items():
            if metric not in metrics:
                raise RecordError(f"{r.path}: results.{task}.{prompt} has no {metric!r} (has {sorted(metrics)})")
            rows.append(ScoreRow(r.display, task, prompt, float(metrics[metric]),
                                 f"{r.path}: results.{task}.{prompt}.{metric}"))
    resolve_scale(rows, "fraction")  # results.json holds fractions: check, then show percent
    table = build_tables([ScoreRow(x.model, x.task, x.prompt, x.score * PERCENT, x.where) for x in rows], PERCENT)[0]
    if note:
        table.notes.append(note)
    # Scores of different data or settings are not comparable: say so in the report.
    if len({json.dumps(r.data.manifest_sha256.get(task), sort_keys=True) for r in task_runs}) > 1:
        table.notes.append("the models were evaluated on different data (manifest_sha256 differs): scores are not "
                           "comparable")
    for key in ("num_fewshot", "limit", "apply_chat_template"):
        if len({json.dumps(getattr(r.config, key)) for r in task_runs}) > 1:
            table.notes.append(f"config.{key} differs between models: "
                               f"{', '.join(f'{r.display}={getattr(r.config, key)}' for r in task_runs)}")
    table.notes += version_notes(task, task_runs)
    recorded = recorded_metric(task, metric, task_runs)
    return TaskReport(table, metric,
                      higher_is_better=recorded.higher_is_better
                      if recorded is not None else higher_is_better(task, metric))


def recorded_metrics(run: Any, task: str) -> list[RecordedMetric] | None:
    """The metrics ``run`` scored ``task`` with, in declared order; None where it did not record them."""
    record = run.task_versions.get(task)
    return None if record is None else record.metrics


def recorded_headline(task: str, runs: Sequence[Any], available: Sequence[str]) -> tuple[str | None, list[str]]:
    """The headline metric the runs recorded for ``task`` (None: none recorded one), and notes where they disagree."""
    heads = {}
    for run in runs:
        metrics = recorded_metrics(run, task)
        if metrics is not None:
            heads.setdefault(metrics[0].name, []).append(run)
    if not heads:
        return None, []
    chosen = next(iter(heads))
    notes = []
    if len(heads) > 1:
        notes.append(f"{task}: the runs recorded different headline metrics "
                     f"({'; '.join(f'{name}: {len(rs)} run(s)' for name, rs in heads.items())}); shown: {chosen}")
    if chosen not in available:
        raise RecordError(f"task {task!r}: the recorded headline metric {chosen!r} is not in the results (has "
                          f"{', '.join(available)})")
    return chosen, notes


def recorded_metric(task: str, metric: str, runs: Sequence[Any]) -> RecordedMetric | None:
    """``metric`` of ``task`` as the runs recorded it; None where none did. Runs that recorded it
    differently (another kind or direction) are an error: their numbers do not mean the same."""
    found = {m for run in runs for m in (recorded_metrics(run, task) or []) if m.name == metric}
    if len(found) > 1:
        ways = "; ".join(f"kind {m.kind}, higher_is_better {m.higher_is_better}" for m in sorted(found, key=repr))
        raise RecordError(f"{task}: metric {metric!r} was recorded differently by the runs ({ways})")
    return next(iter(found), None)


def version_notes(task: str, runs: Sequence[Any]) -> list[str]:
    """Notes naming what differs between the runs' records of ``task``: its version, a prompt's definition."""
    records = [(run, rec) for run in runs if (rec := run.task_versions.get(task)) is not None]
    notes = []
    versions = [(run.display or str(run.path), rec.version) for run, rec in records]
    if len({repr(v) for _name, v in versions}) > 1:
        notes.append(f"{task}: the runs were made with different versions of the task "
                     f"({', '.join(f'{name}: {v}' for name, v in versions)})")
    if changed := differing_prompts([rec for _run, rec in records]):
        notes.append(f"{task}: prompt(s) {', '.join(changed)} differ between the runs (another definition under the "
                     "same name): their scores are not of the same prompt")
    return notes


def differing_prompts(records: Sequence[TaskRecord | None]) -> list[str]:
    """The prompts whose recorded hash differs between ``records`` (each a ``task_versions[task]`` or None)."""
    hashes: dict[str, set] = {}
    for rec in records:
        for name, digest in (rec.prompts if rec is not None else {}).items():
            hashes.setdefault(name, set()).add(digest)
    return sorted(name for name, seen in hashes.items() if len(seen) > 1)

"""What a run recorded about each task it scored (results.json ``task_versions``: version, prompt hashes, metrics).

Reports and ``compare`` read these rather than the registry installed now: a run made under an older declaration is
reported as it was run, and two runs whose task version or prompt differ are said to differ instead of being set side
by side as equals. A results.json written before the record (no ``metrics``) falls back to the installed registry.
A malformed record never gets here: the record's schema refuses it (record/read.py).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..record import RecordedMetric
from ..record.model import TaskRecord
from .tables import ScoresError


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
        raise ScoresError(f"task {task!r}: the recorded headline metric {chosen!r} is not in the results (has "
                          f"{', '.join(available)})")
    return chosen, notes


def recorded_metric(task: str, metric: str, runs: Sequence[Any]) -> RecordedMetric | None:
    """``metric`` of ``task`` as the runs recorded it; None where none did. Runs that recorded it
    differently (another kind or direction) are an error: their numbers do not mean the same."""
    found = {m for run in runs for m in (recorded_metrics(run, task) or []) if m.name == metric}
    if len(found) > 1:
        ways = "; ".join(f"kind {m.kind}, higher_is_better {m.higher_is_better}" for m in sorted(found, key=repr))
        raise ScoresError(f"{task}: metric {metric!r} was recorded differently by the runs ({ways})")
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

"""What a run recorded about each task it scored (results.json ``task_versions``): the task's
declared version, a hash of each prompt, and the metrics it was scored with (the first is the
headline), each with its kind and direction.

Reports and ``compare`` read these rather than the registry installed now: a run made under
an older declaration is reported as it was run, and two runs whose task version or prompt
differ are said to differ instead of being set side by side as equals. A results.json written
before the record (no ``metrics`` in ``task_versions``) falls back to the installed registry.
A record is input from a file: a malformed one is an error naming the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from evalita_data.scoring.metric import CORPUS, HITS

from .tables import ScoresError


@dataclass(frozen=True)
class RecordedMetric:
    name: str
    kind: str  # HITS or CORPUS (evalita_data.scoring.metric)
    higher_is_better: bool


def task_record(run: Any, task: str) -> dict | None:
    """The run's ``task_versions[task]`` (checked), or None for a file written before it."""
    versions = run.raw.get("task_versions")
    if versions is None:
        return None
    if not isinstance(versions, dict):
        raise ScoresError(f"{run.path}: task_versions is not an object of task -> {{version, prompts, metrics}}")
    record = versions.get(task)
    if record is None:
        return None
    if not (isinstance(record, dict) and isinstance(record.get("prompts", {}), dict)):
        raise ScoresError(f"{run.path}: task_versions.{task} is not {{version, prompts: {{name: hash}}, metrics: [...]}}")
    return record


def recorded_metrics(run: Any, task: str) -> list[RecordedMetric] | None:
    """The metrics ``run`` scored ``task`` with, in declared order; None where it did not record them."""
    record = task_record(run, task)
    if record is None or "metrics" not in record:
        return None
    metrics = record["metrics"]
    out = []
    for i, m in enumerate(metrics if isinstance(metrics, list) else [None]):
        if not (isinstance(m, dict) and isinstance(m.get("name"), str) and m.get("kind") in (HITS, CORPUS)
                and isinstance(m.get("higher_is_better"), bool)):
            raise ScoresError(f"{run.path}: task_versions.{task}.metrics[{i}] is not "
                              f"{{name, kind: {HITS!r} or {CORPUS!r}, higher_is_better: true or false}}")
        out.append(RecordedMetric(m["name"], m["kind"], m["higher_is_better"]))
    if not out:
        raise ScoresError(f"{run.path}: task_versions.{task}.metrics is empty")
    return out


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
        raise ScoresError(f"task {task!r}: the recorded headline metric {chosen!r} is not in the results (has {', '.join(available)})")
    return chosen, notes


def recorded_metric(task: str, metric: str, runs: Sequence[Any]) -> RecordedMetric | None:
    """``metric`` of ``task`` as the runs recorded it; None where none did. Runs that recorded it
    differently (another kind or direction) are an error: their numbers do not mean the same."""
    found = {m for run in runs for m in (recorded_metrics(run, task) or []) if m.name == metric}
    if len(found) > 1:
        raise ScoresError(f"{task}: metric {metric!r} was recorded differently by the runs "
                          f"({'; '.join(f'kind {m.kind}, higher_is_better {m.higher_is_better}' for m in sorted(found, key=repr))})")
    return next(iter(found), None)


def version_notes(task: str, runs: Sequence[Any]) -> list[str]:
    """Notes naming what differs between the runs' records of ``task``: its version, a prompt's definition."""
    records = [(run, task_record(run, task)) for run in runs]
    records = [(run, rec) for run, rec in records if rec is not None]
    notes = []
    versions = [(run.display or str(run.path), rec.get("version")) for run, rec in records]
    if len({repr(v) for _name, v in versions}) > 1:
        notes.append(f"{task}: the runs were made with different versions of the task "
                     f"({', '.join(f'{name}: {v}' for name, v in versions)})")
    if changed := differing_prompts([rec for _run, rec in records]):
        notes.append(f"{task}: prompt(s) {', '.join(changed)} differ between the runs (another definition "
                     "under the same name): their scores are not of the same prompt")
    return notes


def differing_prompts(records: Sequence[dict | None]) -> list[str]:
    """The prompts whose recorded hash differs between ``records`` (each a ``task_versions[task]`` or None)."""
    hashes: dict[str, set] = {}
    for rec in records:
        for name, digest in ((rec or {}).get("prompts") or {}).items():
            hashes.setdefault(name, set()).add(digest)
    return sorted(name for name, seen in hashes.items() if len(seen) > 1)

"""The one build pipeline: raw folder -> converter -> schema validation -> JSONL writer.

Everything is written to a temporary folder beside the output; the previous
output is replaced only when every requested task converted and validated.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable

from tqdm import tqdm

from . import __version__
from .errors import MissingSource, ValidationFailed
from .card import write_build_card
from .jsonl import dumps
from .parallel import ordered_map
from .rawsource import RawSource, sha256_file
from .registry import TASK_IDS, get_task
from .report import ConversionReport
from .schema_check import record_problems

MANIFEST = "manifest.json"


@dataclass
class TaskOutcome:
    task: str
    status: str  # "built" | "missing" | "not_implemented"
    entry: dict = field(default_factory=dict)
    message: str = ""


@dataclass
class BuildSummary:
    outcomes: list[TaskOutcome]
    out: Path

    def built(self) -> list[TaskOutcome]:
        return [o for o in self.outcomes if o.status == "built"]

    def not_built(self) -> list[TaskOutcome]:
        return [o for o in self.outcomes if o.status != "built"]


# Called after a task's splits are written, with (task id, task folder, manifest entry):
# the dataset card writer hooks in here so cards live next to their splits.
PostTaskHook = Callable[[str, Path, dict], None]
POST_TASK_HOOKS: list[PostTaskHook] = [write_build_card]


def convert_task(task_id: str, raw_root: Path, dest: Path, seed: int | None = None, progress: bool = True) -> TaskOutcome:
    """Convert one task into ``dest/<split>.jsonl``; raises on bad input or invalid records."""
    spec = get_task(task_id)
    converter = spec.load_converter()
    if converter is None:
        return TaskOutcome(task_id, "not_implemented", message=f"{task_id}: converter not written yet")
    source = RawSource(raw_root / task_id)
    if not source.root.is_dir():
        return TaskOutcome(
            task_id, "missing", message=f"{task_id}: no folder {source.root}. {spec.obtain_hint}"
        )
    report = ConversionReport()
    use_seed = spec.seed if seed is None else seed
    handles: dict[str, IO[str]] = {}
    rows: dict[str, int] = {}
    seen_ids: dict[str, set] = {}
    bar = tqdm(
        total=sum(spec.paper_splits.values()) or None,
        desc=f"{task_id:>4}",
        unit="rec",
        disable=None if progress else True,
        leave=False,
    )
    dest.mkdir(parents=True)
    try:
        for split, record in converter(source, report, use_seed):
            n = rows.get(split, 0) + 1
            problems = record_problems(task_id, record)
            rid = record.get(spec.id_field) if spec.id_field else None
            if spec.id_field:
                ids = seen_ids.setdefault(split, set())
                if rid in ids:
                    problems.append(f"{spec.id_field}: duplicate id {rid!r} in split {split}")
                ids.add(rid)
            if problems:
                where = f"split {split}, record {n}" + (f" ({spec.id_field}={rid!r})" if spec.id_field else "")
                raise ValidationFailed(f"{task_id}: {where} does not match schemas/{spec.schema}.schema.json: " + "; ".join(problems))
            fh = handles.get(split)
            if fh is None:
                path = dest / f"{split}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                fh = handles[split] = open(path, "w", encoding="utf-8", newline="\n")
            fh.write(dumps(record) + "\n")
            rows[split] = n
            bar.update(1)
    except MissingSource as err:
        return TaskOutcome(task_id, "missing", message=str(err))
    finally:
        for fh in handles.values():
            fh.close()
        bar.close()
    if not rows:
        return TaskOutcome(task_id, "missing", message=f"{task_id}: no records converted from {source.root}. {spec.obtain_hint}")
    entry = {
        "tool": "evalita-data",
        "tool_version": __version__,
        "seed": use_seed,
        "inputs": source.inputs(),
        "splits": {
            split: {"rows": rows[split], "sha256": sha256_file(dest / f"{split}.jsonl"), "file": f"{split}.jsonl"}
            for split in sorted(rows)
        },
        "report": report.to_json(),
    }
    for hook in POST_TASK_HOOKS:
        hook(task_id, dest, entry)
    return TaskOutcome(task_id, "built", entry=entry)


def read_manifest(out: Path) -> dict:
    path = out / MANIFEST
    if path.is_file():
        return json.loads(path.read_text("utf-8"))
    return {"tasks": {}, "not_built": {}}


def build(
    raw: Path,
    out: Path,
    tasks: list[str] | None = None,
    seed: int | None = None,
    progress: bool = True,
    echo: Callable[[str], None] = lambda _m: None,
    workers: int | None = None,
) -> BuildSummary:
    """Build the requested tasks (all by default) from ``raw`` into ``out``.

    Raises on the first bad input or invalid record and leaves ``out`` as it was.
    Tasks whose originals are missing are reported, not failed. ``workers``: processes
    converting tasks side by side (default: one per task, at most one per CPU).
    """
    task_ids = list(tasks) if tasks else list(TASK_IDS)
    for tid in task_ids:
        get_task(tid)  # unknown ids fail before any work
    if not raw.is_dir():
        raise FileNotFoundError(f"raw folder {raw} does not exist")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        outcomes = []
        # Tasks convert in parallel processes; outcomes and the first error come in task order.
        # Bars of several processes would garble one terminal: per-task bars only when sequential.
        bars = progress and (len(task_ids) == 1 or workers == 1)
        jobs = [(tid, raw, tmp / tid, seed, bars) for tid in task_ids]
        for outcome in ordered_map(convert_task, jobs, workers):
            echo(_describe(outcome))
            outcomes.append(outcome)
        _install(tmp, out, outcomes)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return BuildSummary(outcomes, out)


def _describe(o: TaskOutcome) -> str:
    if o.status != "built":
        return f"{o.task}: NOT BUILT ({o.status}) - {o.message}"
    splits = ", ".join(f"{s} {v['rows']}" for s, v in o.entry["splits"].items())
    rep = o.entry["report"]
    extra = []
    for kind in ("dropped", "repaired"):
        if rep[kind]:
            extra.append(f"{kind}: " + ", ".join(f"{r} x{n}" for r, n in rep[kind].items()))
    for m in rep["missing"]:
        extra.append(f"splits {', '.join(m['splits'])} not built: missing {', '.join(m['files'])}. {m['hint']}")
    return f"{o.task}: {splits}" + "".join(f"\n    {e}" for e in extra)


def _install(tmp: Path, out: Path, outcomes: list[TaskOutcome]) -> None:
    """Move the built task folders into ``out`` and rewrite the manifest."""
    out.mkdir(parents=True, exist_ok=True)
    manifest = read_manifest(out)
    manifest.setdefault("tasks", {})
    manifest.setdefault("not_built", {})
    for o in outcomes:
        if o.status == "built":
            target = out / o.task
            if target.exists():
                old = tmp / f".old-{o.task}"
                os.replace(target, old)
            os.replace(tmp / o.task, target)
            manifest["tasks"][o.task] = o.entry
            manifest["not_built"].pop(o.task, None)
        else:
            manifest["not_built"][o.task] = {"status": o.status, "message": o.message}
    manifest["tasks"] = dict(sorted(manifest["tasks"].items()))
    manifest["not_built"] = dict(sorted(manifest["not_built"].items()))
    manifest["format"] = 1
    staged = tmp / MANIFEST
    staged.write_text(json.dumps(manifest, ensure_ascii=False, indent=2, sort_keys=True) + "\n", "utf-8")
    os.replace(staged, out / MANIFEST)

"""The one build pipeline: raw folder -> converter -> schema validation -> JSONL writer.

Everything is written to a new version folder beside the output (see install.py); the
output switches to it, in one atomic step, only when every requested task converted and
validated.
"""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable

from tqdm import tqdm

from .. import __version__
from ..errors import DiskFull, EvalitaDataError, MissingSource, SourceError, ValidationFailed
from .install import Staging, current_version
from ..safepaths import check_output_apart
from ..card import write_build_card
from ..jsonl import dumps
from .parallel import ordered_map
from .rawsource import RawSource, sha256_file
from ..registry import get_task, task_ids as registered_task_ids
from .conversion_report import ConversionReport
from ..schema_check import record_problems
from ..manifest import MANIFEST_FILE, MANIFEST_FORMAT, BuildManifest, BuiltTask, NotBuilt, SplitEntry



@dataclass
class TaskOutcome:
    task: str
    status: str  # "built" | "missing" | "not_implemented"
    entry: BuiltTask | None = None  # set when built
    message: str = ""


@dataclass
class BuildSummary:
    outcomes: list[TaskOutcome]
    out: Path
    # False when a task asked for by name was not built: then nothing was installed and ``out`` is as it was.
    installed: bool = True

    def built(self) -> list[TaskOutcome]:
        return [o for o in self.outcomes if o.status == "built"]

    def not_built(self) -> list[TaskOutcome]:
        return [o for o in self.outcomes if o.status != "built"]


# Called after a task's splits are written, with (task id, task folder, manifest entry):
# the dataset card writer hooks in here so cards live next to their splits.
PostTaskHook = Callable[[str, Path, BuiltTask], None]
POST_TASK_HOOKS: list[PostTaskHook] = [write_build_card]


def convert_task(task_id: str, raw_root: Path, dest: Path, seed: int | None = None,
                 progress: bool = True) -> TaskOutcome:
    """Convert one task into ``dest/<split>.jsonl``; raises on bad input or invalid records."""
    spec = get_task(task_id)
    converter = spec.load_converter()
    if converter is None:
        return TaskOutcome(task_id, "not_implemented", message=f"{task_id}: converter not written yet")
    source = RawSource(raw_root / spec.raw_dir)
    if not source.root.is_dir():
        return TaskOutcome(
            task_id, "missing", message=f"{task_id}: no folder {source.root}. {spec.obtain_hint}"
        )
    report = ConversionReport(default_hint=spec.obtain_hint)
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
                raise ValidationFailed(f"{task_id}: {where} does not match {spec.schema_label}: " + "; ".join(problems))
            fh = handles.get(split)
            if fh is None:
                path = dest / f"{split}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                fh = handles[split] = open(path, "w", encoding="utf-8", newline="\n")
            fh.write(dumps(record) + "\n")
            rows[split] = n
            bar.update(1)
    except MissingSource as err:
        return TaskOutcome(task_id, "missing", message=str(err.for_task(task_id, spec.obtain_hint)))
    finally:
        for fh in handles.values():
            fh.close()
        bar.close()
    _check_no_split_vanished(task_id, spec.paper_splits, rows, report, source)
    if not rows:
        return TaskOutcome(task_id, "missing",
                           message=f"{task_id}: no records converted from {source.root}. {spec.obtain_hint}")
    from .fetch import fetched_provenance  # what `evalita-data fetch` downloaded: revision, license

    entry = BuiltTask(
        tool="evalita-data",
        tool_version=__version__,
        seed=use_seed,
        inputs=source.inputs(),
        splits={split: SplitEntry(rows[split], sha256_file(dest / f"{split}.jsonl"), f"{split}.jsonl")
                for split in sorted(rows)},
        report=report.build_report(),
        fetched=fetched_provenance(source.root),
    )
    for hook in POST_TASK_HOOKS:
        hook(task_id, dest, entry)
    return TaskOutcome(task_id, "built", entry=entry)


def _check_no_split_vanished(task_id: str, expected: dict[str, int], rows: dict[str, int], report: ConversionReport,
                             source: RawSource) -> None:
    """Every split of the task is built or reported missing: an empty input may not make one vanish."""
    reported = {s for m in report.missing for s in m.splits}
    lost = [s for s in expected if s not in rows and s not in reported]
    if not lost:
        return
    thin = [(name, why) for name in sorted(source.used) if (why := _thin_file(source.root / name))]
    what = f"split{'s' if len(lost) > 1 else ''} {', '.join(lost)} would be empty"
    if thin:
        name, why = thin[0]
        raise SourceError(source.root / name, None, f"{why}; {task_id}: {what} (expected records)")
    read = ", ".join(str(source.root / n) for n in sorted(source.used)) or str(source.root)
    raise ValidationFailed(f"{task_id}: {what}: no records converted from {read}")


def _thin_file(path: Path) -> str:
    """Why a raw file holds no records ("empty", "only a header line"), or "" if it has some."""
    size = path.stat().st_size
    if size == 0:
        return "empty file (0 bytes)"
    if path.suffix.lower() in (".xlsx", ".zip", ".gz"):
        return ""
    with open(path, "rb") as fh:
        lines = [ln for ln in fh.read().splitlines() if ln.strip()]
    if not lines:
        return "no content (blank lines only)"
    if len(lines) == 1:
        return "only one line (a header and no records)"
    return ""


def read_manifest(out: Path) -> BuildManifest:
    """The build's manifest, or an empty one where there is no build yet."""
    path = out / MANIFEST_FILE
    return BuildManifest.read(path) if path.is_file() else BuildManifest()


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

    Raises on the first bad input or invalid record and leaves ``out`` as it was. Tasks whose originals are missing are
    reported, not failed; but when ``tasks`` names one of them, nothing is installed (``BuildSummary.installed`` is
    False) and ``out`` is left as it was. ``workers``: processes converting tasks side by side (default: one per task,
    at most one per CPU).
    """
    task_ids = list(tasks) if tasks else list(registered_task_ids())
    for tid in task_ids:
        get_task(tid)  # unknown ids fail before any work
    check_output_apart(out, {"--raw": raw})
    check_out_is_a_build(out)
    check_raw_folder(raw, task_ids)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with Staging(out) as staging:
            outcomes = []
            # Tasks convert in parallel processes; outcomes and the first error come in task order.
            # Bars of several processes would garble one terminal: per-task bars only when sequential.
            bars = progress and (len(task_ids) == 1 or workers == 1)
            jobs = [(tid, raw, staging.dir / tid, seed, bars) for tid in task_ids]
            records = [sum(get_task(tid).paper_splits.values()) for tid in task_ids]  # the cost of a task, roughly
            for outcome in ordered_map(convert_task, jobs, workers, costs=records):
                echo(_describe(outcome))
                outcomes.append(outcome)
            # A task asked for by name and not built is a failed build: nothing is installed, as for a bad input.
            installed = not (tasks and any(o.status != "built" for o in outcomes))
            if installed:
                _install(staging, out, outcomes)
    except OSError as err:
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFull(f"no space left on the device of {out} ({err.filename or 'writing the build'}); free some "
                           "space and build again") from None
        raise
    return BuildSummary(outcomes, out, installed)


def _describe(o: TaskOutcome) -> str:
    if o.status != "built":
        return f"{o.task}: NOT BUILT ({o.status}) - {o.message}"
    assert o.entry is not None and o.entry.report is not None
    splits = ", ".join(f"{s} {v.rows}" for s, v in o.entry.splits.items())
    rep = o.entry.report
    extra = []
    for kind, counts in (("dropped", rep.dropped), ("repaired", rep.repaired)):
        if counts:
            extra.append(f"{kind}: " + ", ".join(f"{r} x{n}" for r, n in counts.items()))
    for m in o.entry.missing_parts():
        extra.append(f"splits {', '.join(m.splits or [])} not built: missing {', '.join(m.files or [])}. {m.hint}")
    return f"{o.task}: {splits}" + "".join(f"\n    {e}" for e in extra)


def _install(staging: Staging, out: Path, outcomes: list[TaskOutcome]) -> None:
    """Complete the staged version with the previous build's other tasks and switch ``out`` to it."""
    manifest = read_manifest(out)
    for o in outcomes:
        if o.status == "built" and o.entry is not None:
            manifest.tasks[o.task] = o.entry
            manifest.not_built.pop(o.task, None)
        else:
            manifest.not_built[o.task] = NotBuilt(o.status, o.message)
            shutil.rmtree(staging.dir / o.task, ignore_errors=True)  # a partial folder; the previous one is kept
    rebuilt = {o.task for o in outcomes if o.status == "built"}
    prev = staging.previous_root()
    for task in sorted(set(manifest.tasks) - rebuilt):
        if prev is None or not (prev / task).is_dir():
            # The previous build lost this folder: say so instead of listing what is not there.
            del manifest.tasks[task]
            manifest.not_built[task] = NotBuilt("missing",
                                                f"{task}: its folder was missing from the previous build in {out}")
    manifest.tasks = dict(sorted(manifest.tasks.items()))
    manifest.not_built = dict(sorted(manifest.not_built.items()))
    manifest.format = MANIFEST_FORMAT
    staging.commit(manifest, rebuilt)


def check_out_is_a_build(out: Path) -> None:
    """Refuse an ``--out`` that is a real folder holding entries no build writes (e.g. setuptools' ``build/lib``).

    The new version carries every entry of the previous folder over: another tool's files
    would end up in the data. Our own version link, an empty folder and a build folder of the
    older unversioned layout (``manifest.json`` and task folders) are fine.
    """
    if current_version(out) is not None or not out.is_dir():
        return
    ours = {MANIFEST_FILE, *registered_task_ids()}
    foreign = sorted(name for name in os.listdir(out) if name not in ours)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise EvalitaDataError(f"--out {out} is a folder holding {shown}, which evalita-data build did not write "
                               "(another tool's folder, e.g. setuptools' build/?); a build never mixes with other "
                               "files: choose another --out (default evalita-build) or move them away; nothing was "
                               "built")


def check_raw_folder(raw: Path, task_ids: list[str]) -> None:
    """A raw folder must hold at least one raw sub-folder (``spec.raw_dir``) of the requested tasks."""
    if not raw.is_dir():
        raise FileNotFoundError(f"raw folder {raw} does not exist")
    folders = list(dict.fromkeys(get_task(tid).raw_dir for tid in task_ids))  # variants of one dataset share a folder
    if any((raw / name).is_dir() for name in folders):
        return
    known = {get_task(tid).raw_dir for tid in registered_task_ids()}
    inside = " (it looks like the folder of one task: pass its parent)" if raw.name in known else ""
    raise EvalitaDataError(f"{raw} holds no folder of {', '.join(folders)}{inside}; --raw is the folder with one "
                           "sub-folder of originals per task (raw/<task>/), nothing was built")

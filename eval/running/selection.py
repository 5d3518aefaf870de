"""Which task entries a run evaluates, decided once: the CLI (before the model loads), the plan and the runner read
the same ``Selection`` instead of each deciding again.

An entry is left out when the ``--setting`` cannot ask it (a multiple-choice task that declares no instruct prompts)
or, in a run over every task (``skip_missing``), when the data lack its evaluation split. In a run of named tasks both
are errors, raised where they are found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..sources.base import Source
from ..sources.entries import TaskEntry
from .task_kinds import task_kind


def eval_split(entry: TaskEntry, config: Any) -> str:
    """The split evaluated: --split, else the task's official evaluation split."""
    return config.split or entry.spec.eval_split


@dataclass
class Selection:
    runnable: list[TaskEntry]
    # entry -> why it is not evaluated: no instruct prompts for the setting / no such split in the data
    unaskable: dict[str, str] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


def select(entries: Sequence[TaskEntry], source: Source, config: Any) -> Selection:
    """The entries the run evaluates and why the others are not (see the module docstring)."""
    # Multiple-choice entries that a generative setting cannot ask: they declare no ``TaskSpec.instruct``.
    unaskable = [e for e in entries if not task_kind(e, config.setting).askable]
    if unaskable and not config.skip_missing:
        raise ValueError(f"--setting {config.setting} needs the instruct prompts (TaskSpec.instruct) that "
                         f"{', '.join(e.name for e in unaskable)} do(es) not declare")
    out = Selection([], {e.name: f"the task declares no instruct prompts for --setting {config.setting}"
                         for e in unaskable})
    for entry in entries:
        if entry in unaskable:
            continue
        if config.skip_missing and not source.has_split(entry, eval_split(entry, config)):
            out.missing[entry.name] = source.why_missing(entry, eval_split(entry, config))
        else:
            out.runnable.append(entry)
    return out


def nothing_evaluated(skipped: dict[str, str], source: Source) -> str:
    """The one-line error of a run that evaluated nothing (the reasons per task are printed before it); a local
    folder's task folders that no registered task reads are named."""
    text = (f"nothing was evaluated: every one of the {len(skipped)} task entries was skipped "
            f"({'; '.join(sorted(set(skipped.values())))[:300]})")
    folder = source.folder
    if folder is not None and Path(folder).is_dir():
        from evalita_data.registry import task_ids

        known = set(task_ids())
        unknown = sorted(p.name for p in Path(folder).iterdir()
                         if p.is_dir() and not p.name.startswith(".") and p.name not in known)
        if unknown:
            text += (f"; {folder} holds folders of tasks that are not registered here: {', '.join(unknown)} (an "
                     "out-of-tree task is registered by EVALITA_TASK_PATH or its installed package)")
    return text

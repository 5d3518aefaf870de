"""The task entries of an evaluation: one per registered task, NER one per domain (docs/evaluator.md)."""

from __future__ import annotations

from dataclasses import dataclass

from evalita_data.prompts import CompiledTask
from evalita_data.registry import compiled, get_task, task_ids, tasks
from evalita_data.taskspec import TaskSpec


@dataclass(frozen=True)
class TaskEntry:
    name: str  # "te", "ner_adg", ...
    task_id: str
    config: str | None

    @property
    def spec(self) -> TaskSpec:
        return get_task(self.task_id)

    @property
    def compiled(self) -> CompiledTask:
        return compiled(self.task_id)

    def split_key(self, split: str) -> str:
        """The split's name in a manifest and a Hub layout: ``<config>/<split>`` for a config."""
        return f"{self.config}/{split}" if self.config else split


def all_entries() -> list[TaskEntry]:
    return [TaskEntry(name, spec.id, config) for spec in tasks().values() for name, config in spec.entries()]


def select_entries(names: list[str] | None) -> list[TaskEntry]:
    """Entries named by task id (``ner`` = its three domains) or entry name (``ner_fic``)."""
    entries = all_entries()
    if not names:
        return entries
    chosen: list[TaskEntry] = []
    for name in names:
        hits = [e for e in entries if e.name == name or e.task_id == name]
        if not hits:
            known = sorted({e.name for e in entries} | set(task_ids()))
            raise KeyError(f"unknown task {name!r}; known: {', '.join(known)}")
        chosen += [h for h in hits if h not in chosen]
    return chosen

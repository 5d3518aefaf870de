"""The one registry of the ten Evalita-LLM tasks, shared by builder, cards and evaluator."""

from __future__ import annotations

import importlib

from .taskspec import TaskSpec

TASK_IDS: tuple[str, ...] = ("wic", "te", "sa", "hs", "faq", "at", "ls", "ner", "rel", "sum")


def _load() -> dict[str, TaskSpec]:
    tasks = {}
    for tid in TASK_IDS:
        spec = importlib.import_module(f"evalita_data.tasks.{tid}").TASK
        if spec.id != tid:
            raise RuntimeError(f"evalita_data/tasks/{tid}.py declares task id {spec.id!r}")
        tasks[tid] = spec
    return tasks


TASKS: dict[str, TaskSpec] = _load()


def get_task(task_id: str) -> TaskSpec:
    try:
        return TASKS[task_id]
    except KeyError:
        raise KeyError(f"unknown task {task_id!r}; known tasks: {', '.join(TASK_IDS)}") from None

"""The Hub benchmark file (``eval.yaml``) of a published task repository.

The Hub's eval-results spec (https://huggingface.co/docs/hub/eval-results): a dataset repository
with an ``eval.yaml`` at its root is a benchmark (``name``, ``description``,
``evaluation_framework``, ``tasks``: each an ``id``, the dataset ``config`` and ``split``); a model
repository reports a score in ``.eval_results/*.yaml`` naming the dataset and one ``task_id``
of that file.

Our task ids are stable (docs/publishing.md): per evaluation entry (``wic``; NER one per domain:
``ner_adg``, ``ner_fic``, ``ner_wn``) one task for the entry as a whole (``wic``) and one per
prompt (``wic_p1`` ... ``wic_p6``), each on the entry's config and evaluation split in the
layout published (ours: ``test``; the official one: ``test_1``, ``reduced_test``...).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from ..errors import EvalitaDataError
from ..registry import get_task

EVAL_YAML = "eval.yaml"
# The harness that computes the scores of these tasks (the spec: "could be your own").
EVALUATION_FRAMEWORK = "evalita-llm"
DEFAULT_CONFIG = "default"


class BenchmarkFileError(EvalitaDataError):
    """An ``eval.yaml`` that is not a benchmark file of the Hub's spec."""


def entry_task_ids(task_id: str) -> dict[str, list[str]]:
    """Entry name -> its benchmark task ids: the entry itself, then one per prompt."""
    spec = get_task(task_id)
    return {name: [name] + [f"{name}_{p.name}" for p in spec.prompts] for name, _config in spec.entries()}


def benchmark_tasks(task_id: str, eval_splits: dict[str | None, str]) -> list[dict]:
    """The ``tasks`` of the file: ``eval_splits`` maps each entry's config (None without configs)
    to the name of its evaluation split in the published layout; entries without one are left out."""
    spec = get_task(task_id)
    ids = entry_task_ids(task_id)
    tasks = []
    for name, config in spec.entries():
        split = eval_splits.get(config)
        if split is None:
            continue
        tasks += [{"id": tid, "config": config or DEFAULT_CONFIG, "split": split} for tid in ids[name]]
    return tasks


def eval_yaml(task_id: str, eval_splits: dict[str | None, str]) -> bytes | None:
    """The ``eval.yaml`` of the task's repository; None when no entry's evaluation split is published
    (a benchmark without a task would be refused by the Hub)."""
    spec = get_task(task_id)
    tasks = benchmark_tasks(task_id, eval_splits)
    if not tasks:
        return None
    prompts = ", ".join(p.name for p in spec.prompts)
    doc = {
        "name": f"Evalita-LLM {spec.id.upper()}: {spec.title}",
        "description": (
            f"The {spec.id} task of the Evalita-LLM benchmark for Italian language models (Magnini et al., 2025), "
            f"evaluated with prompts {prompts}. Task <entry> is the entry over all its prompts (the Combined "
            "Performance Score, CPS); task <entry>_<prompt> is one prompt's main metric."
        ),
        "evaluation_framework": EVALUATION_FRAMEWORK,
        "tasks": tasks,
    }
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000).encode("utf-8")


def read_benchmark(path: Path) -> list[dict]:
    """The ``tasks`` of a benchmark file, checked: each a mapping with string ``id``, ``config`` and
    ``split``, ids unique. A file that is not one raises BenchmarkFileError naming the file and key."""
    try:
        doc = yaml.safe_load(Path(path).read_text("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise BenchmarkFileError(f"{path}: not a readable YAML file ({first})") from None
    tasks = doc.get("tasks") if isinstance(doc, dict) else None
    if not isinstance(tasks, list) or not tasks:
        raise BenchmarkFileError(f"{path}: tasks: expected a non-empty list of tasks (the Hub's eval.yaml)")
    seen: set[str] = set()
    for i, task in enumerate(tasks):
        if not isinstance(task, dict):
            raise BenchmarkFileError(f"{path}: tasks[{i}]: expected a mapping with id, config and split")
        for key in ("id", "config", "split"):
            if not isinstance(task.get(key), str) or not task[key]:
                raise BenchmarkFileError(f"{path}: tasks[{i}].{key}: expected a non-empty string, got "
                                         f"{task.get(key)!r}")
        if task["id"] in seen:
            raise BenchmarkFileError(f"{path}: tasks[{i}].id: {task['id']!r} appears twice")
        seen.add(task["id"])
    return tasks


def benchmark_task_ids(path: Path) -> list[str]:
    """The task ids of a pushed ``eval.yaml`` (a file, or a repository folder holding one), in file order."""
    path = Path(path)
    return [t["id"] for t in read_benchmark(path / EVAL_YAML if path.is_dir() else path)]

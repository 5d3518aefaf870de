"""The one registry of tasks, shared by builder, cards, evaluator and report.

Tasks are discovered, never listed by hand. A task is a module that defines ``TASK``
(a :class:`TaskSpec`) or ``TASKS`` (a list of them), found in

- ``evalita_data/tasks/`` (the ten Evalita-LLM tasks);
- the entry-point group ``evalita_llm.tasks`` of installed packages (each entry point
  names such a module);
- the folders listed in the environment variable ``EVALITA_TASK_PATH``
  (``os.pathsep``-separated; each ``*.py`` there is imported as a module of one package,
  so a spec may import its converter relatively).

Every spec is checked when the registry loads (unique id, schema file present, splits
named, metrics and gold field declared, every prompt compiles); a problem stops
with an error naming the module file. See docs/adding-a-task.md.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import pkgutil
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Callable

from .prompts import CompiledTask, PromptError, compile_task, schema_fields
from .taskspec import FOLDER_PACKAGE_PREFIX, GenPrompt, MCPrompt, Metric, TaskSpec

ENV_VAR = "EVALITA_TASK_PATH"
ENTRY_POINT_GROUP = "evalita_llm.tasks"


class TaskRegistryError(RuntimeError):
    """A task declaration that cannot be used; the message names its module file."""


@dataclass(frozen=True)
class _Found:
    spec: TaskSpec
    origin: str  # the file of the declaring module


def _specs_of(module: ModuleType) -> list[_Found]:
    origin = getattr(module, "__file__", None) or module.__name__
    declared = []
    if hasattr(module, "TASK"):
        declared.append(module.TASK)
    declared.extend(getattr(module, "TASKS", ()))
    for spec in declared:
        if not isinstance(spec, TaskSpec):
            raise TaskRegistryError(f"{origin}: TASK/TASKS must hold TaskSpec objects, got {type(spec).__name__}")
    return [_Found(s, origin) for s in declared]


def _builtin_modules() -> list[ModuleType]:
    from . import tasks

    return [importlib.import_module(f"{tasks.__name__}.{m.name}") for m in pkgutil.iter_modules(tasks.__path__)]


def _folder_modules(folder: Path) -> list[ModuleType]:
    """Every ``*.py`` of ``folder`` as a module of one synthetic package (relative imports work)."""
    if not folder.is_dir():
        raise TaskRegistryError(f"{ENV_VAR} names {folder}, which is not a folder")
    package = FOLDER_PACKAGE_PREFIX + hashlib.sha1(str(folder.resolve()).encode()).hexdigest()[:10]
    if package not in sys.modules:
        spec = ModuleSpec(package, None, is_package=True)
        spec.submodule_search_locations = [str(folder.resolve())]
        sys.modules[package] = importlib.util.module_from_spec(spec)
    return [importlib.import_module(f"{package}.{p.stem}")
            for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")]


def _entry_point_modules() -> list[ModuleType]:
    from importlib.metadata import entry_points

    modules = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        module = ep.load()
        if not isinstance(module, ModuleType) or not (hasattr(module, "TASK") or hasattr(module, "TASKS")):
            raise TaskRegistryError(f"entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}) must name a module "
                                    "defining TASK or TASKS")
        modules.append(module)
    return modules


def _check(found: _Found) -> None:
    """Everything the builder, evaluator and report rely on; raises TaskRegistryError."""
    spec, origin = found.spec, found.origin

    def fail(problem: str) -> TaskRegistryError:
        return TaskRegistryError(f"{origin}: task {spec.id!r}: {problem}")

    if not spec.id.isidentifier():
        raise fail("the id must be a Python identifier (letters, digits, underscores)")
    if not spec.schema_path().is_file():
        raise fail(f"schema file {spec.schema_path()} does not exist")
    if spec.output_type not in ("multiple_choice", "generate_until"):
        raise fail(f"output_type {spec.output_type!r} is neither 'multiple_choice' nor 'generate_until'")
    splits = spec.split_names()
    for what, split in (("eval_split", spec.eval_split), ("fewshot_split", spec.fewshot_split)):
        if not split or split not in splits:
            raise fail(f"{what} {split!r} is not one of the splits named in paper_splits ({', '.join(sorted(splits))})")
    if not spec.prompts or len({p.name for p in spec.prompts}) != len(spec.prompts):
        raise fail("prompts must be a non-empty list with unique names")
    kind = MCPrompt if spec.output_type == "multiple_choice" else GenPrompt
    if not all(isinstance(p, kind) for p in spec.prompts):
        raise fail(f"a {spec.output_type} task takes {kind.__name__} prompts only")
    if not spec.metrics or not all(isinstance(m, Metric) for m in spec.metrics):
        raise fail("metrics must be a non-empty list of Metric objects (e.g. from evalita_data.scoring.metrics)")
    if len(set(spec.metric_names())) != len(spec.metrics):
        raise fail(f"metric names repeat: {spec.metric_names()}")
    try:
        compile_task(spec)
    except PromptError as err:
        raise fail(str(err)) from None
    if spec.output_type == "generate_until" and (spec.gold_field is None or spec.gold_field not in schema_fields(spec)):
        raise fail(f"a generative task needs gold_field, a field of its schema (got {spec.gold_field!r})")
    _check_output_format(spec, fail)
    for what, ref in (("converter", spec.converter), ("fetcher", spec.fetcher)):
        if isinstance(ref, str) and re.fullmatch(r"[\w.]+:\w+", ref) is None:
            raise fail(f"{what} {ref!r}: expected a function or \"module:function\"")
    unparsed_as = spec.instruct.unparsed_as if spec.instruct is not None else None
    if unparsed_as is not None and isinstance(spec.instruct.answers,
                                              list) and sorted(unparsed_as) != list(range(len(spec.instruct.answers))):
        raise fail(f"instruct.unparsed_as {unparsed_as} must give one class per answer ({len(spec.instruct.answers)} "
                   "answers)")


def _check_output_format(spec: TaskSpec, fail: Callable[[str], TaskRegistryError]) -> None:
    """output_pattern compiles, and its closing rule is made of answers the pattern accepts."""
    if spec.output_pattern is None:
        if spec.output_closings or spec.output_empty:
            raise fail("output_closings/output_empty need an output_pattern")
        return
    if spec.output_type != "generate_until":
        raise fail("output_pattern is for generative tasks (a multiple-choice answer is one of its choices)")
    try:
        pattern = re.compile(spec.output_pattern)
    except re.error as err:
        raise fail(f"output_pattern {spec.output_pattern!r} is not a regular expression ({err})") from None
    if not spec.output_closings:
        raise fail("output_pattern needs output_closings, the shortest complete answers that end an answer "
                   "within --constrained's token budget (e.g. NER ('x$PER', 'x$LOC', 'x$ORG'))")
    for closing in (*spec.output_closings, *filter(None, [spec.output_empty])):
        if pattern.fullmatch(closing) is None:
            raise fail(f"closing answer {closing!r} does not match output_pattern {spec.output_pattern!r}")


def discover() -> dict[str, TaskSpec]:
    """Import, check and order every task (built-in, entry points, ``EVALITA_TASK_PATH``)."""
    modules = _builtin_modules() + _entry_point_modules()
    for folder in filter(None, os.environ.get(ENV_VAR, "").split(os.pathsep)):
        modules += _folder_modules(Path(folder))
    found: dict[str, _Found] = {}
    for module in modules:
        for f in _specs_of(module):
            if f.spec.id in found:
                raise TaskRegistryError(f"{f.origin}: task id {f.spec.id!r} is already declared in "
                                        f"{found[f.spec.id].origin}")
            _check(f)
            found[f.spec.id] = f
    ordered = sorted(found.values(), key=lambda f: (f.spec.order, f.spec.id))
    return {f.spec.id: f.spec for f in ordered}


_TASKS: dict[str, TaskSpec] | None = None


def tasks() -> dict[str, TaskSpec]:
    """Task id -> spec, in listing order (the paper's order, then added tasks by id)."""
    global _TASKS
    if _TASKS is None:
        _TASKS = discover()
    return _TASKS


def task_ids() -> tuple[str, ...]:
    return tuple(tasks())


def reload() -> dict[str, TaskSpec]:
    """Discover again (after ``EVALITA_TASK_PATH`` changed); clears the compiled-prompt cache."""
    global _TASKS
    _TASKS = None
    compiled.cache_clear()
    return tasks()


def get_task(task_id: str) -> TaskSpec:
    try:
        return tasks()[task_id]
    except KeyError:
        raise KeyError(f"unknown task {task_id!r}; known tasks: {', '.join(task_ids())}") from None


@lru_cache(maxsize=None)
def compiled(task_id: str) -> CompiledTask:
    """The registered task ``task_id`` with its templates compiled (``prompts.compile_task``)."""
    return compile_task(get_task(task_id))


def task_of_entry(name: str) -> TaskSpec | None:
    """The task an evaluation entry (``te``, ``ner_adg``) belongs to; None if no task has it."""
    for spec in tasks().values():
        if any(name == entry for entry, _config in spec.entries()) or name == spec.id:
            return spec
    return None


def __getattr__(name: str):
    # TASKS and TASK_IDS are computed from the discovered registry, never written by hand.
    if name == "TASKS":
        return tasks()
    if name == "TASK_IDS":
        return task_ids()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

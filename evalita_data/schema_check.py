"""Loading the JSON Schemas of ``schemas/`` and checking records against them."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from jsonschema import Draft202012Validator

from .registry import get_task
from .taskspec import schema_file


@lru_cache(maxsize=None)
def load_schema(name: str | Path) -> dict:
    """A task's schema by name (``schemas/<name>.schema.json``) or path (``TaskSpec.schema``)."""
    return json.loads(schema_file(name).read_text("utf-8"))


@lru_cache(maxsize=None)
def validator(name: str | Path) -> Draft202012Validator:
    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def record_problems(task_id: str, record: object) -> list[str]:
    """Every violation of one record as ``field: problem``; empty if valid.

    Runs the task's JSON Schema first and, only on a schema-valid record, the
    task's own checks that JSON Schema cannot express.
    """
    spec = get_task(task_id)
    problems = []
    for err in sorted(validator(spec.schema).iter_errors(record), key=lambda e: [str(p) for p in e.absolute_path]):
        path = ".".join(str(p) for p in err.absolute_path) or "(record)"
        problems.append(f"{path}: {err.message}")
    if not problems and spec.record_check is not None:
        problems.extend(spec.record_check(record))  # type: ignore[arg-type]
    return problems

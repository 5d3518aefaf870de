"""Loading the JSON Schemas of ``schemas/`` and checking records against them."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from jsonschema import Draft202012Validator

from .registry import get_task


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    text = resources.files("evalita_data.schemas").joinpath(f"{name}.schema.json").read_text("utf-8")
    return json.loads(text)


@lru_cache(maxsize=None)
def validator(name: str) -> Draft202012Validator:
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

"""Loading the JSON Schemas of ``schemas/`` and checking records against them.

Two validators, one verdict: a compiled check (fastjsonschema, generated Python code,
many times faster than ``jsonschema`` on these records) decides that a record is valid
on the hot path; only a record it rejects goes to ``jsonschema``, which words every
problem and has the last word (a record it accepts is valid). The compiled check is
built from a copy of the schema in draft 2019-09 spelling (``prefixItems`` ->
``items`` + ``additionalItems``), and never accepts a record ``jsonschema`` rejects
(tests/data_side/building/test_build_speed_paths.py compares both on every built record and on mutations).
Without fastjsonschema installed, ``jsonschema`` alone is used.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from jsonschema import Draft202012Validator

from .registry import get_task
from .taskspec import load_schema

__all__ = ["draft2019", "fast_check", "load_schema", "record_problems", "schema_problems", "validator"]


@lru_cache(maxsize=None)
def validator(name: str | Path) -> Draft202012Validator:
    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def draft2019(schema: Any) -> Any:
    """The schema in the draft 2019-09 spelling that fastjsonschema understands, tuned for its code.

    Draft 2020-12 renamed tuple validation: ``prefixItems`` + ``items`` became
    ``items`` (a list) + ``additionalItems``. Nothing else used in ``schemas/`` differs.
    A ``not`` of a lone ``pattern`` becomes the equivalent positive pattern (see
    :func:`_pattern_absent`).
    """
    if isinstance(schema, list):
        return [draft2019(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: draft2019(v) for k, v in schema.items() if k not in ("prefixItems", "$schema", "$id")}
    if "prefixItems" in schema:
        out["items"] = draft2019(schema["prefixItems"])
        if "items" in schema:
            out["additionalItems"] = draft2019(schema["items"])
    if (absent := _pattern_absent(schema.get("not"))) is not None:
        del out["not"]
        out["allOf"] = [*out.get("allOf", []), {"type": "string", "pattern": absent}]
    return out


def _pattern_absent(subschema: object) -> str | None:
    """For ``{"pattern": P}``: a pattern found (``re.search``) exactly where P is not; else None.

    ``not: {"pattern": P}`` holds for a string without a match of P (and for no other type:
    ``pattern`` accepts them, so ``not`` rejects them), hence ``type: string`` beside it.

    fastjsonschema checks ``not`` by running the subschema and catching the exception it
    raises when the subschema fails, that is for every valid string (tens of thousands of
    exceptions in a NER build). ``^(?![\\s\\S]*(?:P))`` matches, at the start only, a string
    with no match of P anywhere: the same verdict with one regex search; for P a character class
    ``[C]`` (``[\\n\\r]``), ``^[^C]*\\Z``, twice as fast. fastjsonschema
    rewrites ``$`` to ``\\Z`` in P here just as it does inside ``not``.
    """
    if not isinstance(subschema, dict) or set(subschema) != {"pattern"} or not isinstance(subschema["pattern"], str):
        return None
    pattern = subschema["pattern"]
    if ONE_CLASS.fullmatch(pattern):  # [C]: no character of C anywhere, a scan without backtracking
        absent = f"^[^{pattern[1:-1]}]*\\Z"
    else:
        absent = f"^(?![\\s\\S]*(?:{pattern}))"
    try:
        re.compile(absent)
    except re.error:  # e.g. P starts with global flags (?i): keep the plain ``not``
        return None
    return absent


# A pattern that is one character class, not negated, no nested brackets, no $ (which
# fastjsonschema rewrites even there): "[\\n\\r]".
ONE_CLASS = re.compile(r"\[(?!\^)(?:[^\[\]\\$]|\\.)+\]")


@lru_cache(maxsize=None)
def fast_check(name: str | Path) -> Callable[[object], bool] | None:
    """A compiled ``record -> is valid`` for one schema, or None without fastjsonschema."""
    try:
        import fastjsonschema
    except ImportError:
        return None
    compiled = fastjsonschema.compile(draft2019(load_schema(name)), use_default=False, use_formats=False)

    def is_valid(record: object) -> bool:
        try:
            compiled(record)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    return is_valid


def schema_problems(name: str | Path, record: object) -> list[str]:
    """Every violation of schema ``name`` as ``field: problem``, worded by ``jsonschema``; empty if valid."""
    check = fast_check(name)
    if check is not None and check(record):
        return []
    return [
        f"{'.'.join(str(p) for p in err.absolute_path) or '(record)'}: {err.message}"
        for err in sorted(validator(name).iter_errors(record), key=lambda e: [str(p) for p in e.absolute_path])
    ]


def record_problems(task_id: str, record: object) -> list[str]:
    """Every violation of one record as ``field: problem``; empty if valid.

    Runs the task's JSON Schema first and, only on a schema-valid record, the
    task's own checks that JSON Schema cannot express.
    """
    spec = get_task(task_id)
    problems = schema_problems(spec.schema, record)
    if not problems and spec.record_check is not None:
        problems.extend(spec.record_check(record))  # type: ignore[arg-type]
    return problems

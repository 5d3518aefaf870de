"""The one reader of a run: ``read_run`` (a run folder or its results.json) and ``parse_record`` (a results.json
already read, e.g. built in memory from an lm-eval folder). Everything is checked before anything is computed, each
problem one line naming the file, the line and the key (``RecordError``): docs/run-record.md, "What the reader checks".
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Iterator

from evalita_data.schema_check import fast_check, validator

from .build import build_record, check_scores, check_status
from .migrate import RecordError, migrate_results, migrate_sample
from .model import FORMAT_VERSION, RunRecord

RESULTS_FILE = "results.json"
RESULTS_SCHEMA = Path(__file__).with_name("results.schema.json")
SAMPLE_SCHEMA = Path(__file__).with_name("sample.schema.json")


def non_finite(value: Any, key: str = "") -> str | None:
    """The key of the first NaN or infinite number inside ``value`` ("" for ``value`` itself); None when all are
    finite."""
    if isinstance(value, float) and not math.isfinite(value):
        return key or "(value)"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        if (found := non_finite(v, f"{key}.{k}" if key else str(k))) is not None:  # dotted, as the schema's keys
            return found
    return None


def schema_problem(schema: Path, doc: object) -> str | None:
    """The first violation of ``schema`` as ``key K: problem`` (a missing key named by its path); None when valid.
    The compiled check decides (evalita_data/schema_check.py); jsonschema words a rejection."""
    check = fast_check(schema)
    if check is not None and check(doc):
        return None
    errors = sorted(validator(schema).iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None
    err, where = errors[0], ".".join(str(p) for p in errors[0].absolute_path)
    if err.validator == "required":
        missing = next((k for k in err.validator_value if isinstance(err.instance, dict) and k not in err.instance),
                       "?")
        key = f"{where}.{missing}" if where else missing
        return f"key {key}: missing, a required key of format_version {FORMAT_VERSION}"
    if err.validator == "anyOf" and "description" in err.schema:  # say what is expected, not "none of the schemas"
        return f"key {where}: {err.instance!r:.60} is not {err.schema['description']}"
    return f"key {where or '(top)'}: {err.message[:200]}"


def inside(path: Path, folder: Path) -> bool:
    """Whether ``path``, every link followed, stays inside ``folder``."""
    return path.resolve().is_relative_to(folder.resolve())


def read_run(path: Path, partial: bool = False, samples: bool = True) -> RunRecord:
    """The checked record of a run folder or its results.json, with its samples (without: ``samples`` False, for a
    glance at a run still writing them); an unfinished run only with ``partial``."""
    path = Path(path) / RESULTS_FILE if Path(path).is_dir() else Path(path)
    if not inside(path, path.parent):
        raise RecordError(f"{path}: a symbolic link to {path.resolve()}, outside the run folder; copy the file instead")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise RecordError(f"{path}: cannot be read ({err})") from None
    doc = json_document(str(path), text)
    if isinstance(doc, dict) and (key := non_finite(doc)) is not None:
        raise RecordError(f"{path}:{_constant_line(text)}: key {key}: not a finite number (NaN or Infinity)")
    try:
        return parse_record(path, doc, partial, samples)
    except RecursionError:  # a document the JSON decoder took, too deep for the checks
        raise RecordError(f"{path}: nested too deeply to be a run record") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object whose keys are all different: a key given twice would be read as its last value, in silence."""
    doc = dict(pairs)
    if len(doc) != len(pairs):
        seen: set[str] = set()
        raise _DuplicateKey(next(k for k, _v in pairs if k in seen or seen.add(k)))
    return doc


class _DuplicateKey(ValueError):
    """A JSON object that names one key twice."""


def json_document(where: str, text: str | bytes, decoder: json.JSONDecoder | None = None,
                  one_line: bool = False) -> Any:
    """The JSON of ``text`` (read from ``where``; ``one_line``: a JSONL line), a key given twice or nesting too deep for
    the decoder refused in one line."""
    try:
        return (decoder or UNIQUE_JSON).decode(text if isinstance(text, str) else text.decode("utf-8"))
    except _DuplicateKey as err:
        raise RecordError(f"{where}: key {err.args[0]}: given twice in one object (read, the last would win "
                          "in silence); each key is given once") from None
    except RecursionError:
        raise RecordError(f"{where}: nested too deeply to be read (arrays or objects inside each other)") from None
    except json.JSONDecodeError as err:
        raise RecordError(f"{where}{'' if one_line else f':{err.lineno}'}: not valid JSON ({err.msg})") from None
    except UnicodeDecodeError as err:
        raise RecordError(f"{where}: not UTF-8 text ({err.reason})") from None


# A JSON string (skipped), a non-finite constant, or a number with an exponent (1e999 reads as infinity).
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|NaN|-?Infinity|-?\d+(?:\.\d+)?[eE][+-]?\d+')


def _constant_line(text: str) -> int:
    """The line of the first non-finite number of a JSON text (1 where none is found)."""
    for token in _TOKEN.finditer(text):
        value = token.group()
        if not value.startswith('"') and not math.isfinite(float(value)):
            return text.count("\n", 0, token.start()) + 1
    return 1


def checked_document(path: Path, doc: object) -> tuple[dict, int]:
    """A results.json document in the current format once checked (finite numbers, version, schema), and the
    version it was written in. The runner checks what it writes with it too (running/results_file.py)."""
    if not isinstance(doc, dict):
        raise RecordError(f"{path}: expected a results.json object, got {type(doc).__name__}")
    if (key := non_finite(doc)) is not None:
        raise RecordError(f"{path}: key {key}: not a finite number (NaN or Infinity)")
    doc, written = migrate_results(path, doc)
    if problem := schema_problem(RESULTS_SCHEMA, doc):
        raise RecordError(f"{path}: {problem}")
    return doc, written


def record_text(record: RunRecord) -> str:
    """The results.json text of ``record`` (its ``to_json``), once checked as its reader checks it: the only text
    ever written as a results.json, so a file the reader refuses (a misspelt key) is never written."""
    text = json.dumps(record.to_json(), ensure_ascii=False, indent=2, default=str) + "\n"  # default: an identity value
    checked_document(record.path, json.loads(text))
    return text


class _NonFinite(ValueError):
    """A JSON text holds NaN, Infinity or a number too large for a float (Python's json reads all three)."""


def _finite_float(text: str) -> float:
    if math.isfinite(value := float(text)):
        return value
    raise _NonFinite(text)


UNIQUE_JSON = json.JSONDecoder(object_pairs_hook=_unique_keys)
# Reads only finite numbers: the hooks run for NaN/Infinity (float() reads them too) and for numbers with a fraction
# or exponent only.
FINITE_JSON = json.JSONDecoder(parse_constant=_finite_float, parse_float=_finite_float, object_pairs_hook=_unique_keys)


def checked_sample(where: str, line: object, finite: bool = False) -> None:
    """One sample line in the current format: a JSON object of finite numbers that passes the sample schema
    (``finite``: already read by ``FINITE_JSON``, no need to look for a non-finite number again)."""
    if not isinstance(line, dict):
        raise RecordError(f"{where}: expected a JSON object, got {type(line).__name__}")
    if not finite and (key := non_finite(line)) is not None:
        raise RecordError(f"{where}: key {key}: not a finite number (NaN or Infinity)")
    if problem := schema_problem(SAMPLE_SCHEMA, line):
        raise RecordError(f"{where}: {problem}")


def parse_record(path: Path, doc: object, partial: bool = False, samples: bool = True,
                 in_memory: dict[tuple[str, str], list[dict]] | None = None) -> RunRecord:
    """The checked record of a results.json already read (``path`` names it in errors and locates its samples);
    ``in_memory``: its samples built in memory (an lm-eval folder's, converted), checked as a file's lines are,
    instead of the files beside ``path``."""
    doc, written = checked_document(path, doc)
    record = build_record(path, doc, written)
    check_status(record, partial)
    if not samples:
        return record
    record.samples.update(read_samples(record, written) if in_memory is None
                          else memory_samples(record, written, in_memory))
    check_scores(record)
    return record


def memory_samples(record: RunRecord, written: int, samples: dict[tuple[str, str], list[dict]]
                   ) -> Iterator[tuple[tuple[str, str], list[dict]]]:
    """Samples built in memory, each line checked as a samples file's (``path: task prompt, sample K`` in errors)."""
    for (task, prompt), given in samples.items():
        scores = record.results.get(task, {}).get(prompt)
        where = f"{record.path}: {task} {prompt}"
        if scores is None:
            raise RecordError(f"{where}: samples of a prompt the record has no scores of")
        first_line: dict[int, int] = {}
        lines = [checked_line(f"{where}, sample {k}", line, written, record.run_id, k, first_line)
                 for k, line in enumerate(given, 1)]
        if len(lines) != scores["n"]:
            raise RecordError(f"{where}: {len(lines)} sample(s), but the record has n={scores['n']}")
        yield (task, prompt), lines


def checked_line(where: str, line: object, written: int, run_id: str | None, number: int, first_line: dict[int, int],
                 finite: bool = False, version: dict | None = None) -> dict:
    """One sample line, migrated and checked: the schema, this run's ``run_id``, its task's ``version`` where both the
    line and the results.json record one, a document not seen before (``first_line``: doc_id -> its first line,
    updated)."""
    line = migrate_sample(line, written, run_id) if isinstance(line, dict) else line
    checked_sample(where, line, finite=finite)
    if run_id is not None and line["run_id"] != run_id:
        raise RecordError(f"{where}: key run_id: {line['run_id']!r} is another run's (the results.json beside it "
                          f"is run {run_id}): a samples file of another run placed in this folder")
    if version is not None and "task_version" in line and line["task_version"] != version:
        raise RecordError(f"{where}: key task_version: {line['task_version']} is another version of the task than the "
                          f"results.json beside it records ({version}): a samples file of another run placed in this "
                          "folder")
    if (doc := line["doc_id"]) in first_line:
        raise RecordError(f"{where}: key doc_id: document {doc} appears again (first on line {first_line[doc]}); "
                          "each document is scored once per prompt")
    first_line[doc] = number
    return line


def read_samples(record: RunRecord, written: int) -> Iterator[tuple[tuple[str, str], list[dict]]]:
    """Every samples file of the record's scores that exists, checked line by line."""
    folder = record.path.parent
    for task, prompts in record.results.items():
        for prompt, scores in prompts.items():
            path = record.samples_path(task, prompt)
            if not (path.is_file() or path.is_symlink()):
                continue
            if not inside(path, folder):
                raise RecordError(f"{path}: a symbolic link to {path.resolve()}, outside the run folder {folder}; "
                                  "copy the file instead")
            lines = sample_lines(path, written, record.run_id, task_version(record, task, prompt))
            if len(lines) != scores["n"]:
                raise RecordError(f"{path}: {len(lines)} line(s), but {record.path.name} records n={scores['n']} "
                                  f"for {task} {prompt}: the samples are not those the scores were computed from")
            yield (task, prompt), lines


def task_version(record: RunRecord, task: str, prompt: str) -> dict | None:
    """The ``task_version`` a sample line of ``task``/``prompt`` of this run carries (None: the record has none)."""
    recorded = record.task_versions.get(task)
    if recorded is None or prompt not in recorded.prompts:
        return None
    return {"version": recorded.version, "prompt": recorded.prompts[prompt]}


def sample_lines(path: Path, written: int, run_id: str | None, version: dict | None = None) -> list[dict]:
    """The lines of one samples file, each checked; one line per document."""
    lines: list[dict] = []
    first_line: dict[int, int] = {}
    with open(path, encoding="utf-8") as fh:
        for number, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                line = json_document(f"{path}:{number}", text, FINITE_JSON, one_line=True)
            except _NonFinite:  # the key of the number, read again as Python's json reads it
                raise RecordError(f"{path}:{number}: key {non_finite(json.loads(text))}: not a finite number "
                                  "(NaN or Infinity)") from None
            try:
                lines.append(checked_line(f"{path}:{number}", line, written, run_id, number, first_line, finite=True,
                                          version=version))
            except RecursionError:
                raise RecordError(f"{path}:{number}: nested too deeply to be a sample line") from None
    return lines

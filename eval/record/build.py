"""A schema-valid results.json (record/read.py) as the typed ``RunRecord``, checked against its run identity."""

from __future__ import annotations

import math
import reprlib
from pathlib import Path
from typing import Any

from ..naming import check_given_name
from .migrate import RecordError
from .model import (finished_text, Asked, ChatTemplate, ConfigRecord, DataRecord, ModelRecord, RecordedMetric,
                    RunRecord, SourceTool, TaskRecord, Timing, TraceSummary)


def _set(values: dict) -> dict:
    """The entries of a (closed-schema) section that are not null: a null is the field's default."""
    return {k: v for k, v in values.items() if v is not None}


def model_record(doc: dict) -> ModelRecord:
    return ModelRecord(**_set(doc))


def config_record(config: dict, identity: dict | None) -> ConfigRecord:
    template = config.get("chat_template")
    prompts = (identity or {}).get("prompts")
    return ConfigRecord(**{**_set(config), "prompts": list(prompts) if isinstance(prompts, list) else None,
                           "chat_template": ChatTemplate(**template) if isinstance(template, dict) else None})


def task_record(doc: dict) -> TaskRecord:
    metrics = doc.get("metrics")
    return TaskRecord(version=doc.get("version"), prompts=dict(doc.get("prompts") or {}),
                      metrics=[RecordedMetric(**m) for m in metrics] if metrics else None,
                      budget_recorded="max_new_tokens" in doc, max_new_tokens=doc.get("max_new_tokens"))


# The config keys the run identity holds too (running/identity.py run_identity): a reader takes them from the config.
IDENTITY_CONFIG = ("setting", "num_fewshot", "limit", "split", "max_new_tokens", "seed", "apply_chat_template",
                   "system_instruction", "fewshot_as_multiturn", "constrained")


def check_identity(path: Path, doc: dict) -> None:
    """The recorded run identity hashes to the run id (as the sweep checks a finished run), and the config and model
    say what it says: an identity, a limit or a model edited after the run is refused, never believed."""
    identity = doc["run_identity"]
    if identity is None:  # an older file (format 0): nothing to check it against
        return
    if (hashed := run_id(identity)) != doc["run_id"]:
        raise RecordError(f"{path}: key run_identity: hashes to {hashed}, not to the run id {doc['run_id']}: "
                          "edited after the run")
    model = identity.get("model") if isinstance(identity.get("model"), dict) else {}
    pairs = [("config", k, identity.get(k)) for k in IDENTITY_CONFIG] + [("model", k, v) for k, v in model.items()]
    for section, key, value in pairs:
        if key in doc[section] and doc[section][key] != value:
            raise RecordError(f"{path}: key {section}.{key}: {reprlib.repr(doc[section][key])}, but the run identity "
                              f"(run {doc['run_id']}) records {reprlib.repr(value)}: edited after the run")


def check_scores(record: RunRecord) -> None:
    """Each prompt's recorded scores recomputed from its samples as ``compare`` and the bootstrap score them
    (metrics.metric_of): a metric its task does not declare, or a score its samples do not give, is refused."""
    from ..metrics import metric_of

    for task, prompts in record.results.items():
        for prompt, scores in prompts.items():
            lines, where = record.samples.get((task, prompt)), f"{record.path}: key results.{task}.{prompt}"
            for name, value in scores.items():
                if name in ("n", "unparsed"):  # n: the reader counts the lines
                    continue
                try:
                    metric = metric_of(task, name)
                except KeyError as err:
                    raise RecordError(f"{where}.{name}: {err.args[0]}") from None
                if lines is None:  # no samples file (push-results says so): nothing to recompute from
                    continue
                try:
                    derived = metric(lines)
                except (KeyError, TypeError, ValueError, ZeroDivisionError) as err:
                    source = record.samples_path(task, prompt).name
                    raise RecordError(f"{where}.{name}: cannot be recomputed from {source} "
                                      f"({type(err).__name__}: {err})") from None
                _agree(record, task, prompt, name, value, derived)
            if "unparsed" in scores and lines is not None and all("parsed" in s for s in lines):  # generated answers
                _agree(record, task, prompt, "unparsed", scores["unparsed"], sum(s["parsed"] is None for s in lines))


def _agree(record: RunRecord, task: str, prompt: str, name: str, recorded: float, derived: float) -> None:
    if not math.isclose(recorded, derived, rel_tol=1e-9, abs_tol=1e-12):  # beyond float rounding
        raise RecordError(f"{record.path}: key results.{task}.{prompt}.{name}: recorded {recorded!r}, but "
                          f"{record.samples_path(task, prompt).name} gives {derived!r}: a score edited after the run")


def build_record(path: Path, doc: dict, written: int) -> RunRecord:
    """The record of a schema-valid, migrated ``doc``; ``written``: the format version of the file."""
    check_identity(path, doc)
    if doc["model"].get("name") is not None:  # the rule of --model-name: what outputs show is one line
        try:
            check_given_name(doc["model"]["name"], "key model.name")
        except ValueError as err:
            raise RecordError(f"{path}: {err}") from None
    tasks, tool = doc.get("tasks") or {}, doc.get("source_tool")
    record = RunRecord(
        path=path, format_version=written, status=doc["status"], run_id=doc["run_id"], identity=doc["run_identity"],
        model=model_record(doc["model"]), config=config_record(doc["config"], doc["run_identity"]),
        data=DataRecord(**_set(doc["data"])), results=doc["results"],
        task_versions={t: task_record(v) for t, v in (doc.get("task_versions") or {}).items()},
        timing={t: Timing(**v) if isinstance(v, dict) else Timing(wall_s=v)  # older: wall seconds only
                for t, v in (doc.get("timing") or {}).items()},
        planned=list(tasks["planned"]) if tasks.get("planned") is not None else None,
        skipped_tasks=list(tasks.get("skipped") or []), skipped=doc.get("skipped") or {},
        parsed_by=doc.get("parsed_by") or {}, baselines=doc.get("baselines") or {},
        package_versions=doc.get("versions") or {}, resources=doc.get("resources") or {},
        unparsed_flags=doc.get("unparsed_flags") or {}, task_config=doc.get("task_config"),
        asked={t: Asked(v["request"], v.get("max_new_tokens"), None if v.get("until") is None else tuple(v["until"]))
               for t, v in (doc.get("asked") or {}).items()},
        reasoning={t: {p: TraceSummary(**v) for p, v in prompts.items()}
                   for t, prompts in (doc.get("reasoning") or {}).items()},
        source_tool=SourceTool(**tool) if tool is not None else None)
    stored = doc.get("comparable_with_paper")  # compared with the one derived from the config, never believed
    if stored is not None and stored != record.comparable_with_paper:
        # No path in the words: a note goes on published cards too (push-results).
        record.notes.append(f"results.json says comparable_with_paper: {str(stored).lower()}, but its recorded config "
                            f"says {'yes' if record.comparable_with_paper else 'no'}: the value recomputed from the "
                            "config is shown")
    return record


def run_id(identity: dict[str, Any]) -> str:
    """The short hash of a run identity (folder names, results.json ``run_id``)."""
    import hashlib
    import json

    blob = json.dumps(identity, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:ID_LENGTH]


ID_LENGTH = 10  # hex digits of the hash in folder names: 40 bits, no collision among one user's runs


def check_status(record: RunRecord, partial: bool) -> None:
    """A run that evaluated nothing is refused; an unfinished one unless ``partial``."""
    if record.status == "empty":
        skipped = record.skipped
        raise RecordError(f"{record.path}: a run that evaluated nothing ({len(skipped)} task(s) skipped: "
                          f"{'; '.join(f'{k}: {v}' for k, v in list(skipped.items())[:3])}); nothing to report")
    if record.partial and not partial:
        # Written after every task by `run`: an interrupted or killed run has only some tasks.
        raise RecordError(f"{record.path}: an unfinished run (status {record.status!r}, "
                          f"{finished_text(record.planned, record.skipped_tasks, record.results)}); run the same "
                          "`evalita-eval run` command again to complete it, or report its finished tasks with "
                          "--partial")

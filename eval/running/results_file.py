"""results.json: the run's ``RunRecord`` (record/model.py), built when the run starts, filled as it goes, written whole
after each task (a temporary file renamed: a killed run leaves the last complete version, ``"status": "partial"``);
and what an earlier invocation of the same run recorded that the next one carries over."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from ..api import RequestKind
from ..naming import display_name
from ..record.build import build_record, config_record, model_record, run_id
from ..record.migrate import RecordError
from ..record.model import Asked, DataRecord, RecordedMetric, RunRecord, TaskRecord
from ..record.read import checked_document, checked_sample, record_text
from ..sources.entries import TaskEntry
from .identity import REPLACE, RESULTS_FILE, FolderOfAnotherRun, thinking_values
from .task_kinds import task_kind

VERSIONED_PACKAGES = ("evalita-llm", "torch", "transformers", "datasets", "tokenizers", "numpy", "rouge-score",
                      "jinja2")


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def task_versions(entry: TaskEntry, setting: str) -> TaskRecord:
    """The task's version, a short hash of each prompt it is asked with (an edited prompt shows even where the version
    was not raised) and its metrics, headline first, with kind and direction (reporting/task_report.py reads them)."""
    kind = task_kind(entry, setting)
    return TaskRecord(version=entry.spec.version,
                      prompts={name: hashlib.sha256(repr(p).encode("utf-8")).hexdigest()[:12]
                               for name, p in kind.declared_prompts().items()},
                      metrics=[RecordedMetric(m.name, m.kind, m.higher_is_better) for m in kind.declared_metrics()],
                      max_new_tokens=kind.budget)  # the paper's budget (None: it does not generate): readers check it


def earlier_record(doc: dict | None, path: Path) -> RunRecord | None:
    """The record an earlier invocation of this same run wrote (``claim_folder``), checked as any reader checks it."""
    if doc is None:
        return None
    try:
        checked, written = checked_document(path, doc)
        return build_record(path, checked, written)
    except RecordError as err:
        raise FolderOfAnotherRun(f"{err}{REPLACE}") from None


def carry_over(before: RunRecord | None, running: set[str], record: RunRecord, doc: dict | None) -> list[str]:
    """Copy into ``record`` each task of the earlier record ``before`` that this invocation does not run, with its
    manifest hashes; returns those tasks. The kept tasks' samples written before ``format_version`` (``doc``, the
    earlier file) get this run's id."""
    if before is None:
        return []
    kept = [task for task in before.results if task not in running]
    for task in kept:
        for name in ("results", "timing", "resources", "parsed_by", "reasoning", "baselines", "task_versions", "asked"):
            if task in getattr(before, name):
                getattr(record, name)[task] = getattr(before, name)[task]
        if task in before.data.manifest_sha256:
            record.data.manifest_sha256[task] = before.data.manifest_sha256[task]
    if doc is not None and "format_version" not in doc:  # the same identity (claim_folder): its samples are this run's
        samples = record.path.parent / "samples"
        for path in (samples / f"{task}_{prompt}.jsonl" for task in kept for prompt in before.results[task]):
            if path.is_file():
                add_run_id(path, record.run_id)
    return kept


def add_run_id(path: Path, rid: str | None) -> None:
    """A samples file of format 0 in format 1: each line takes the run's id (docs/run-record.md)."""
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps({"run_id": rid, **s}, ensure_ascii=False) + "\n" for s in lines), "utf-8")
    tmp.replace(path)


def config_json(c: Any, chat_template: dict | None, replicas: int) -> dict:
    """results.json ``config``: the run's options as given (its ``RunSpec``); thinking's markers and trace budget
    (forced or default) when on, the BERTScore scorer where one was given; ``replicas`` change no number."""
    thinking = thinking_values(c) if c.thinking else {}
    if c.bertscore_model:  # the scorer of bertscore_f1 (running/bertscore.py): its model's files or commit
        from .bertscore import bertscore_record

        thinking["bertscore"] = bertscore_record(c.bertscore_model)
    return {"num_fewshot": c.num_fewshot, "limit": c.limit, "max_memory": c.max_memory,
            "batch_size": "auto" if c.batch_size is None else c.batch_size,
            "apply_chat_template": c.apply_chat_template, "seed": c.seed, "device": c.device,
            "max_new_tokens": c.max_new_tokens, "setting": c.setting, "constrained": c.constrained,
            "system_instruction": c.system_instruction, "fewshot_as_multiturn": c.fewshot_as_multiturn,
            "chat_template": chat_template, "split": c.split, "thinking": bool(c.thinking), "replicas": replicas,
            **thinking}


def asked_record(kind: Any) -> Asked:
    """How a task kind asks the model: ``generate_until`` with its token budget and the stop strings its requests carry
    (none when thinking without forcing), or ``loglikelihood``."""
    if kind.request_kind is not RequestKind.GENERATE:
        return Asked(str(kind.request_kind))
    return Asked(str(RequestKind.GENERATE), kind.max_new_tokens, tuple(kind.sent_stops))


def new_record(runner: Any, planned: list[str]) -> RunRecord:
    """The record of ``runner``'s run as it starts: identity, model, data source, config, versions (running/runner.py
    fills in the rest as the run goes). A backend identity key the record does not declare refuses here, before work."""
    identity, model = runner.identity, runner.model
    try:
        recorded = model_record({**model.record, "cache_key": model.cache_key})
    except TypeError as err:  # ModelRecord(**identity): an undeclared key
        raise RecordError(f"backend {model.backend!r}: its cache_identity() has a key results.json does not declare "
                          f"({err}): put what a backend resolves under cache_identity()['resolved'] "
                          "(docs/adding-a-backend.md)") from None
    recorded.name = display_name(recorded if model.given_name is None else {"name": model.given_name})
    recorded.num_parameters = runner.backend.num_parameters
    config = config_json(runner.config, runner.identity["chat_template"], getattr(runner.backend, "replicas", 1))
    return RunRecord(path=runner.out / RESULTS_FILE, status="partial", run_id=run_id(identity), identity=identity,
                     model=recorded, config=config_record(config, identity), planned=planned,
                     data=DataRecord(source=runner.source.description, **runner.source.provenance()),
                     package_versions=package_versions())


def write_samples(out: Path, entry: str, prompt: str, samples: list[dict], rid: str,
                  task_version: dict | None = None) -> None:
    """Write ``OUT/samples/<entry>_<prompt>.jsonl`` whole (a temporary file renamed over it), each line with the run id
    and the task's ``task_version`` (it belongs to the results.json beside it), checked as its reader checks it."""
    folder = out / "samples"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{entry}_{prompt}.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        for s in samples:
            line = {"run_id": rid, **({"task_version": task_version} if task_version is not None else {}), **s}
            checked_sample(f"{folder / f'{entry}_{prompt}.jsonl'}: doc_id {s['doc_id']}", line)
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    tmp.replace(folder / f"{entry}_{prompt}.jsonl")


def write_results_file(record: RunRecord) -> None:
    """Write the record's results.json whole (a temporary file renamed over it), once its reader would accept it:
    the only writer never writes a record the schema refuses (record/read.py)."""
    text = record_text(record)
    tmp = record.path.with_name(".results.json.tmp")
    tmp.write_text(text, "utf-8")
    tmp.replace(record.path)

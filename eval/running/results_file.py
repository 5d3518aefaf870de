"""results.json: what a run writes of itself (scores, identity, data, timing, versions), and what
an earlier invocation of the same run wrote that the next one carries over.

Written whole to a temporary file and renamed after each task, so a killed run leaves the last
complete version, marked ``"status": "partial"``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any, Callable

from ..api import RequestKind
from ..naming import NAME_FIELD, display_name
from ..record import FORMAT_VERSION
from ..record.read import checked_document, checked_sample
from ..sources.entries import TaskEntry
from ..reporting.unparsed_flag import flagged_prompts
from .comparability import comparability_record
from .identity import ID_FIELD, IDENTITY_FIELD, RESULTS_FILE, run_id
from .task_kinds import kind_for_run, task_kind
from ..settings.thinking import DEFAULT_TRACE_BUDGET

VERSIONED_PACKAGES = ("evalita-llm", "torch", "transformers", "datasets", "tokenizers", "numpy", "rouge-score", "jinja2")
TIMING_KEYS = ("wall_s", "compute_s", "requests", "computed", "cached")


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def task_versions(entry: TaskEntry, setting: str) -> dict:
    """The task's declared version, a short hash of each prompt it is asked with (an edited
    prompt shows in results.json even where the version was not raised) and the metrics it is
    scored with, headline first, with kind and direction: what reports read (reporting/recorded.py)."""
    kind = task_kind(entry, setting)
    return {"version": entry.spec.version,
            "prompts": {name: hashlib.sha256(repr(p).encode("utf-8")).hexdigest()[:12] for name, p in kind.declared_prompts().items()},
            "metrics": [{"name": m.name, "kind": m.kind, "higher_is_better": m.higher_is_better} for m in kind.declared_metrics()],
            # The paper's generation budget (None: the task does not generate): what readers check --max-new-tokens against.
            "max_new_tokens": kind.budget}


def rounded_timing(total: dict[str, float]) -> dict[str, float]:
    return {k: round(total[k], 3) for k in TIMING_KEYS}


def earlier_timing(doc: dict | None, path: Path, echo: Callable[[str], None]) -> dict[str, dict[str, float]]:
    """Per task, the timing that earlier invocations of this same run (``claim_folder``) wrote.

    A resume reads most requests back from the cache: its own times alone would hide the
    compute of the invocations before it."""
    timing = doc.get("timing") if doc is not None else None
    if not isinstance(timing, dict):
        return {}
    earlier = {}
    for task, entry in timing.items():
        if not (isinstance(entry, dict) and set(entry) == set(TIMING_KEYS)
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 for v in entry.values())):
            echo(f"note: {path}: timing.{task} is not {{{', '.join(TIMING_KEYS)}}} of non-negative numbers: not carried over")
            continue
        earlier[task] = entry
    return earlier


def carry_over(doc: dict | None, running: set[str], sections: dict[str, dict], manifest: dict,
               samples: Path | None = None, rid: str | None = None) -> list[str]:
    """Copy into ``sections`` (results.json key -> the dict this run writes) each task of ``doc``'s
    results that this invocation does not run, with its manifest hashes; returns those tasks. The
    kept tasks' files in ``samples`` written before ``format_version`` get this run's id ``rid``."""
    if doc is None or not isinstance(doc.get("results"), dict):
        return []
    data = doc.get("data") if isinstance(doc.get("data"), dict) else {}
    earlier_manifest = data.get("manifest_sha256") if isinstance(data.get("manifest_sha256"), dict) else {}
    kept = [task for task, scores in doc["results"].items() if task not in running and isinstance(scores, dict)]
    for task in kept:
        for name, into in sections.items():
            if isinstance(doc.get(name), dict) and task in doc[name]:
                into[task] = doc[name][task]
        if task in earlier_manifest:
            manifest[task] = earlier_manifest[task]
    if samples is not None and "format_version" not in doc:  # the same identity (claim_folder): its samples are this run's
        for path in (samples / f"{task}_{prompt}.jsonl" for task in kept for prompt in doc["results"][task]):
            if path.is_file():
                add_run_id(path, rid)
    return kept


def add_run_id(path: Path, rid: str | None) -> None:
    """A samples file of format 0 in format 1: each line takes the run's id (docs/run-record.md)."""
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps({"run_id": rid, **s}, ensure_ascii=False) + "\n" for s in lines), "utf-8")
    tmp.replace(path)


def thinking_config(c: Any) -> dict:
    """results.json ``config`` of issue 39's options: thinking on or off, its markers and the trace's budget (forced
    or default); the BERTScore scorer where one was given."""
    if c.bertscore_model:  # the scorer of bertscore_f1 (running/bertscore.py): its model's files or commit
        from .bertscore import bertscore_record

        scorer = {"bertscore": bertscore_record(c.bertscore_model)}
    else:
        scorer = {}
    if not c.thinking:
        return {"thinking": False, **scorer}
    return {"thinking": True, "think_markers": list(c.think_markers), "max_thinking_tokens": c.max_thinking_tokens,
            "trace_budget": c.max_thinking_tokens or DEFAULT_TRACE_BUDGET, **scorer}


def config_json(c: Any) -> dict:
    """results.json ``config``: the run's options as given (its ``RunSpec``)."""
    return {
        "num_fewshot": c.num_fewshot, "limit": c.limit, "batch_size": "auto" if c.batch_size is None else c.batch_size,
        "max_memory": c.max_memory,
        "apply_chat_template": c.apply_chat_template, "seed": c.seed, "device": c.device,
        "max_new_tokens": c.max_new_tokens,
        "setting": c.setting, "constrained": c.constrained,
        "system_instruction": c.system_instruction, "fewshot_as_multiturn": c.fewshot_as_multiturn,
        "chat_template": None, "split": c.split,
        **thinking_config(c),
    }


def asked_record(kind: Any) -> dict:
    """How a task kind asks the model: ``generate_until`` with its token budget and the stop strings its
    requests carry (none when thinking without forcing), or ``loglikelihood``."""
    if kind.request_kind is not RequestKind.GENERATE:
        return {"request": str(kind.request_kind)}
    return {"request": str(RequestKind.GENERATE), "max_new_tokens": kind.max_new_tokens, "until": list(kind.sent_stops)}


def results_document(runner: Any, result: Any, manifest: dict) -> dict:
    """The whole results.json of ``runner``'s run as it stands (``result``: its ``RunResult``)."""
    doc = {
        # The record's format (record/model.py FORMAT_VERSION, docs/run-record.md): readers migrate older ones.
        "format_version": FORMAT_VERSION,
        # "partial" until every task is finished: a killed or interrupted run is never taken for a whole one.
        "status": result.status,
        # Every input that can change a number (running/identity.py) and its hash (the default folder's suffix).
        IDENTITY_FIELD: runner.identity,
        ID_FIELD: run_id(runner.identity),
        # What a partial report counts against: "N of M tasks finished".
        "tasks": {"planned": runner._planned, "skipped": runner._skipped},
        # Every input that can change a number (the backend's cache identity) and its hash, the
        # model part of the resume-cache key: two runs with equal "cache_key" share their cache.
        # "name": how every output names the model (naming.display_name; --model-name), no part of the identity.
        "model": {**runner.model.record, NAME_FIELD: display_name({**runner.model.record, NAME_FIELD: runner.model.given_name}),
                  "cache_key": runner.model.cache_key},
        # A source may add its provenance (the official Hub source: dataset revisions).
        "data": {"source": runner.source.description, "manifest_sha256": manifest, **runner.source.provenance()},
        # replicas: data-parallel replicas (eval/replicas), which change no number (not in the identity).
        "config": {**config_json(runner.config), "chat_template": runner.chat_template, "replicas": getattr(runner.backend, "replicas", 1)},
        # The paper's whole evaluation of the tasks evaluated, or not and why (comparability.py): tables and cards say so.
        **comparability_record(runner.config, [runner._entries[name] for name in result.results if name in runner._entries]),
        "results": result.results,
        # Per task: its declared version and a hash of each prompt's definition (TaskSpec).
        "task_versions": {name: runner._task_versions.get(name) or task_versions(runner._entries[name], runner.config.setting)
                          for name in result.results},
        # Per task, prompt and answer rule (settings/answers.py), how many generated answers it parsed.
        "parsed_by": runner.parsed_by,
        # --thinking on (settings/thinking.py): per task and prompt, the traces' mean length, how many were forced closed or never ended.
        **({"reasoning": runner.reasoning} if runner.config.thinking else {}),
        "unparsed_flags": flagged_prompts(result.results),  # prompts with >= 10 % unparsed answers (issue 28)
        "baselines": runner.baselines,
        "skipped": result.skipped,
        "versions": package_versions(),
        "timing": result.timing,
        # Per task: the process's peak RSS so far and, on CUDA, the task's peak allocation (MiB).
        "resources": result.resources,
    }
    # Per task, how it was asked (EEE's generation_config): greedy generation's budget and stops, or none (scored choices).
    doc["asked"] = {name: asked_record(kind_for_run(runner._entries[name], runner.config)) for name in result.results if name in runner._entries}
    if runner.config.constrained:  # it applies to generations with a format only: say to which tasks
        doc["task_config"] = {name: {"constrained": runner.constrained_entry(runner._entries[name])} for name in result.results}
    return doc


def sample_task_version(entry: TaskEntry, setting: str, prompt: str) -> dict:
    """What a sample line records of its task (``task_version``): the version and the prompt's hash that results.json
    ``task_versions`` records, so that a samples file of another version of the task is never read as this run's."""
    versions = task_versions(entry, setting)
    return {"version": versions["version"], "prompt": versions["prompts"][prompt]}


def write_samples(out: Path, entry: str, prompt: str, samples: list[dict], rid: str, task_version: dict | None = None) -> None:
    """Write ``OUT/samples/<entry>_<prompt>.jsonl`` whole (a temporary file renamed over it); each line
    carries the run id ``rid`` and the task's ``task_version`` (it belongs to the results.json beside it)
    and is checked: its reader accepts it (docs/run-record.md)."""
    folder = out / "samples"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{entry}_{prompt}.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        for s in samples:
            line = {"run_id": rid, **({"task_version": task_version} if task_version is not None else {}), **s}
            checked_sample(f"{folder / f'{entry}_{prompt}.jsonl'}: doc_id {s['doc_id']}", line)
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    tmp.replace(folder / f"{entry}_{prompt}.jsonl")


def write_results_file(out: Path, doc: dict) -> None:
    """Write ``OUT/results.json`` whole (a temporary file renamed over it), once its reader would accept it:
    the only writer never writes a record the schema refuses (record/read.py)."""
    tmp = out / ".results.json.tmp"
    text = json.dumps(doc, ensure_ascii=False, indent=2, default=str) + "\n"  # default: an identity value a backend did not make JSON
    checked_document(out / RESULTS_FILE, json.loads(text))
    tmp.write_text(text, "utf-8")
    tmp.replace(out / RESULTS_FILE)

"""``evalita-eval export-eee RUN OUT``: one run in the Every Eval Ever schema (docs/push-results.md, "Every Eval
Ever"): the aggregate ``<uuid>.json`` and ``<uuid>_samples.jsonl``, validated against ``eee_schemas/`` before they are
written. Exported as published (public.py); deterministic: the uuid derives from the run's contents. EEE's vocabulary
as its own lm-eval converter writes it, so that our exports join theirs: ``metric_id`` as
``every_eval_ever/converters/common/metrics.py`` of the ``every-eval-ever`` 0.3.0 package (registry revision below),
``sample_hash`` as its ``converters/lm_eval/instance_level_adapter.py`` computes it."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..record.model import RunRecord, SampleLine
from ..record.read import read_run, record_text
from ..reporting.task_report import TaskReport, build_task_report, task_order
from ..settings.thinking import UNFINISHED
from ..naming import display_name, is_local_model
from evalita_data.registry import task_of_entry
from .export_lm_eval import item_score
from .model_page import official_datasets
from .public import check_publishable, public_record

SCHEMAS = Path(__file__).parent / "eee_schemas"
BENCHMARK = "evalita-llm"
SCHEMA_VERSION = "0.3.0"  # eee_schemas/SOURCE.md
METRIC_ID_REGISTRY_REVISION = "8b83e9c"
HARNESS_NAMESPACE = "lm-evaluation-harness"
OUR_NAMESPACE = "evalita-eval"  # the CPS: no harness reports it

CANONICAL_METRIC_IDS = {"acc": "accuracy", "accuracy": "accuracy", "bleu": "bleu", "f1": "f1", "f1_score": "f1",
                        "em": "exact-match", "exact_match": "exact-match", "precision": "precision", "recall": "recall",
                        "rouge1": "rouge-1", "rouge2": "rouge-2", "rougeL": "rouge-l", "rouge_l": "rouge-l"}
# lm-eval's own evalita_llm tasks (0.4.13) report as "f1" the metric of ours named here (tests/eval/test_eval_metrics.py
# checks each against lm-eval's function); export-eee writes it under that id too (docs/push-results.md).
LM_EVAL_OWN_F1 = {"wic": "f1_binary", "hs": "f1_binary", "sa": "sentipolc_f1", "ls": "ls_f1", "ner": "ner_f1",
                  "rel": "rel_f1"}
METRIC_KINDS = {"acc": "accuracy", "acc_norm": "accuracy", "accuracy": "accuracy", "f1": "f1",
                **dict.fromkeys(("rouge1", "rouge2", "rougeL", "rougeLsum"), "text_overlap")}

# results.json's model.backend -> inference_platform, deployment_type and the engine (name, the package whose version
# results.json records; a served model's is not known). A backend not listed (another package's; none recorded: an
# older run, of hf) is taken as run here on a Hub model.
BACKENDS: dict[str, tuple[str, str, tuple[str, str] | None]] = {
    "hf": ("huggingface", "self_deployed", ("transformers", "transformers")),
    "vllm": ("huggingface", "self_deployed", ("vllm", "vllm")),
    "openai-chat": ("openai_compatible_api", "externally_managed", None),
    "openai-completions": ("openai_compatible_api", "externally_managed", None),
}


def metric_config(name: str, description: str, namespace: str = HARNESS_NAMESPACE) -> dict:
    """A ``metric_config`` as EEE's lm-eval converter writes one for a metric on [0, 1], higher better."""
    details = {"metric_id_registry_revision": METRIC_ID_REGISTRY_REVISION}
    if name not in CANONICAL_METRIC_IDS:
        details["metric_id_status"] = "unregistered"
    # metric_id, the id EEE joins on: the registry's slug, else <namespace>.<name>.
    config = {"evaluation_description": description, "metric_name": name, "metric_unit": "proportion",
              "metric_id": CANONICAL_METRIC_IDS.get(name) or f"{namespace}.{name}", "lower_is_better": False,
              "score_type": "continuous", "min_score": 0, "max_score": 1, "additional_details": details}
    if name in METRIC_KINDS:
        config["metric_kind"] = METRIC_KINDS[name]
    return config


def sample_hash(prompt: str, reference: object) -> str:
    """EEE's lm-eval converter's ``sample_hash``: the same item and prompt hash alike in both exports."""
    blob = json.dumps({"raw": prompt, "reference": str(reference)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


@lru_cache(maxsize=None)
def _validator(name: str) -> Any:
    from jsonschema import Draft7Validator

    return Draft7Validator(json.loads((SCHEMAS / name).read_text("utf-8")))


def validate(doc: dict, name: str, where: str) -> None:
    """One line naming the file and the first schema violation."""
    error = min(_validator(name).iter_errors(doc), key=lambda e: list(e.path), default=None)
    if error is not None:
        path = "/".join(str(p) for p in error.path) or "(top)"
        raise ValueError(f"{where}: not valid against {name} at {path}: {error.message[:200]}")


def _segment(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", text).strip("._") or "model"


def _ids(run: RunRecord) -> tuple[str, str, str]:
    """(developer, model, model id): a Hub id's organisation, name and id; a local model "local", its name
    (naming.display_name: --model-name, else folder and weights hash) and the id its model-index names it by."""
    if is_local_model(run.model):
        return "local", _segment(display_name(run.model)), display_name(run.model)
    hub_id = run.model.name_or_path
    developer = hub_id.split("/", 1)[0] if "/" in hub_id else "unknown"
    return _segment(developer), _segment(hub_id.rsplit("/", 1)[-1]), hub_id


def _source_data(run: RunRecord, task: str) -> dict:
    official = official_datasets(run).get(task)
    if official is not None:
        return {"dataset_name": f"Evalita-LLM {task}", "source_type": "hf_dataset", "hf_repo": official[0],
                "additional_details": {"revision": official[1]}}
    hashes = run.data.manifest_sha256.get(task) or {}
    return {"dataset_name": f"Evalita-LLM {task}", "source_type": "other",
            "additional_details": {"source": run.data.source or "?",
                                   **{f"sha256 {split}": str(h) for split, h in sorted(hashes.items())}}}


def _generation_config(run: RunRecord, task: str) -> dict:
    """How the task was asked, as results.json's ``asked`` records it (running/results_file.py): greedy generation
    with its token budget and stop strings, or log-likelihood scoring of the choices; the shots and setting (the
    schema wants every detail a string). A run recorded before ``asked`` gives the shots and setting only."""
    details = {"num_fewshot": str(run.config.num_fewshot or 0), "setting": run.config.setting or "loglikelihood",
               "apply_chat_template": str(bool(run.config.apply_chat_template)).lower()}
    asked = run.asked.get(task)
    if asked is None:
        return {"additional_details": details}
    if asked.max_new_tokens is None:  # scored choices: no generation budget
        return {"additional_details": {**details, "request": asked.request}}
    return {"generation_args": {"temperature": 0.0, "max_tokens": asked.max_new_tokens},
            "additional_details": {**details, "request": asked.request, "do_sample": "false",
                                   "until": json.dumps(list(asked.until or ()), ensure_ascii=False)}}


def _score(value: float, n: object, **details: str) -> dict:
    out: dict = {"score": float(value)}
    if isinstance(n, (int, float)) and int(n) > 0:
        out["uncertainty"] = {"num_samples": int(n)}
    return {**out, **({"details": details} if details else {})}


def _results(run: RunRecord, reports: dict[str, TaskReport], timestamp: str) -> list[dict]:
    rows = []
    for task, rep in reports.items():
        common = {"source_data": _source_data(run, task), "evaluation_timestamp": timestamp,
                  "generation_config": _generation_config(run, task)}
        spec = task_of_entry(task)
        lm_eval_f1 = LM_EVAL_OWN_F1.get(spec.id) if spec else None
        for prompt in sorted(run.results[task]):
            cell = run.results[task][prompt]
            for metric in sorted(k for k in cell if k not in ("n", "unparsed")):
                rows.append({"evaluation_result_id": f"{task}/{prompt}/{metric}", "evaluation_name": f"{task} {prompt}",
                             "metric_config": metric_config(metric, f"Evalita-LLM {task}, prompt {prompt}: {metric}"),
                             **common, "score_details": _score(cell[metric], cell["n"])})
            if lm_eval_f1 in cell:
                rows.append({"evaluation_result_id": f"{task}/{prompt}/f1", "evaluation_name": f"{task} {prompt}",
                             "metric_config": metric_config("f1", f"Evalita-LLM {task}, prompt {prompt}: {lm_eval_f1}, "
                                                            "as lm-eval's own evalita-mp task reports it (f1)"),
                             **common, "score_details": _score(cell[lm_eval_f1], cell["n"])})
        cps = rep.table.stats().per_model[0].cps / rep.table.scale
        rows.append({"evaluation_result_id": f"{task}/CPS/{rep.metric}", "evaluation_name": f"{task} CPS", **common,
                     "metric_config": metric_config(f"cps_{rep.metric}", f"Evalita-LLM {task}: Combined Performance "
                                                    f"Score of {rep.metric} over {len(rep.table.prompts)} prompts "
                                                    "(the paper's figure)", OUR_NAMESPACE),
                     "score_details": _score(cps, None, prompts=str(len(rep.table.prompts)))})
    return rows


def _instance(run: RunRecord, ids: dict, task: str, prompt: str, metric: str, sample: SampleLine) -> dict:
    from ..metrics import metric_of

    mc = sample.multiple_choice
    score = item_score(metric_of(task, metric), sample.line)  # as our lm-eval tasks log it: EEE's converter agrees
    shown = ((sample.choices[sample.prediction] if 0 <= sample.prediction < len(sample.choices) else "?") if mc
             else str(sample.prediction))
    raw = sample.generation if isinstance(sample.generation, str) else shown
    gold = str(sample.gold) if mc else sample.target  # as EEE's lm-eval converter: a choice's gold index
    prompt_text = sample.prompt or ""
    # A generated answer no rule read (or whose trace never ended) is exported so: never as the class scored instead.
    unread = (str(sample.line.get("unparsed_reason") or "no rule read it")
              if "parsed" in sample.line and sample.line["parsed"] is None
              else UNFINISHED if sample.line.get("reasoning_unfinished") is True else None)
    meta = {"doc_id": str(sample.doc_id), "prompt": prompt}  # and a scored choice's per-choice log-likelihoods
    meta.update({k: json.dumps(v) for k in ("loglikelihoods", "is_greedy") if (v := getattr(sample, k)) is not None})
    record = {"schema_version": SCHEMA_VERSION, **ids, "evaluation_name": f"{task} {prompt}",
              "evaluation_result_id": f"{task}/{prompt}/{metric}", "sample_id": f"{task}/{sample.doc_id}",
              # as EEE's lm-eval converter hashes (prompt, target): a multiple-choice target is the gold index
              "sample_hash": sample_hash(prompt_text, sample.gold if mc else sample.target),
              "metadata": meta, "interaction_type": "single_turn",
              "input": {"raw": prompt_text,
                        "reference": [json.dumps(gold, ensure_ascii=False) if not isinstance(gold, str) else gold]},
              "output": {"raw": [raw]},
              "answer_attribution": [{"turn_idx": 0, "source": "output.raw", "extracted_value": "" if unread else shown,
                                      "extraction_method": f"unparsed: {unread}" if unread else sample.parsed_by
                                      or ("loglikelihood argmax" if mc else "generation"), "is_terminal": True}],
              "evaluation": {"score": score, "is_correct": score == 1.0}}
    if mc:
        record["input"]["choices"] = [str(c) for c in sample.choices]
    return record


def _instance_lines(run: RunRecord, reports: dict[str, TaskReport], ids: dict) -> list[str]:
    """One validated JSON line per item and prompt (the task's headline metric)."""
    lines = []
    for task, rep in reports.items():
        for prompt in sorted(run.results[task]):
            samples_path = run.samples_path(task, prompt)
            for sample in run.sample_lines(task, prompt) or []:  # read and checked with the run (record/read.py)
                record = _instance(run, ids, task, prompt, rep.metric, sample)
                validate(record, "instance_level_eval.schema.json", f"{samples_path}: doc_id {sample.doc_id!r}")
                lines.append(json.dumps(record, ensure_ascii=False, sort_keys=True))
    return lines


def _model_info(run: RunRecord, developer: str, model_id: str) -> dict:
    """The model as EEE names it: its name (naming.display_name), id, developer, and where and with what it ran
    (a local folder is ``inference_platform: local``, never the Hub's)."""
    # How the model was loaded, in lm-eval's --model_args form (EEE's converter copies that string).
    args = {"pretrained": model_id, "revision": run.model.revision, "dtype": run.model.dtype, **run.model.options}
    local = is_local_model(run.model)
    platform, deployed, engine = BACKENDS.get(str(run.model.backend), ("huggingface", "self_deployed", None))
    info = {"name": display_name(run.model), "id": model_id, "developer": developer,
            "inference_platform": "local" if local and deployed == "self_deployed" else platform,  # unless served
            "additional_details": {"deployment_type": deployed,
                                   "model_availability": "unknown", **({"local_folder": "true"} if local else {}),
                                   **{k: str(v) for k in ("revision", "dtype", "backend", "files_sha256", "file_sha256",
                                                          "num_parameters")
                                      if (v := getattr(run.model, k)) is not None},
                                   "model_args": ",".join(f"{k}={v}" for k, v in args.items() if v is not None)}}
    if engine is None:  # a served model's engine is not known
        return info
    version = run.package_versions.get(engine[1])
    return {**info, "inference_engine": {"name": engine[0], **({"version": str(version)} if version else {})}}


def export_eee(results_dir: Path, out: Path, organization: str = "unknown",
               model_name: str | None = None) -> list[Path]:
    """Write ``out/data/evalita-llm/<developer>/<model>/<uuid>.json`` and its ``_samples.jsonl``; return both paths.
    ``model_name``: how the files name the model (default: results.json's ``model.name``; naming.display_name)."""
    path = results_dir / "results.json" if results_dir.is_dir() else results_dir
    if not path.is_file():
        raise ValueError(f"{path}: no results.json; expected a folder of `evalita-eval run --output-dir`")
    checked = read_run(path, partial=True)  # its checks and messages
    run, replacements = public_record(checked, model_name, path.parent)
    developer, model, model_id = _ids(run)
    run_id = str(uuid.UUID(bytes=hashlib.sha256(record_text(checked).encode("utf-8")).digest()[:16], version=4))
    stamp = str(int(path.stat().st_mtime))
    folder = out / "data" / BENCHMARK / developer / model
    rel = f"data/{BENCHMARK}/{developer}/{model}/{run_id}_samples.jsonl"
    evaluation_id = f"{BENCHMARK}/{model_id}/{stamp}"
    reports = {task: build_task_report(task, [run]) for task in task_order(set(run.results))}
    lines = _instance_lines(run, reports, {"evaluation_id": evaluation_id, "model_id": model_id})
    samples_bytes = ("\n".join(lines) + "\n").encode("utf-8") if lines else b""
    aggregate = {
        "schema_version": SCHEMA_VERSION, "evaluation_id": evaluation_id, "evaluation_timestamp": stamp,
        "retrieved_timestamp": stamp, "source_metadata": {
            "source_name": "evalita-eval", "source_type": "evaluation_run", "source_organization_name": organization,
            "evaluator_relationship": "third_party", "additional_details": {
                "status": run.status_text, "setting": run.config.setting or "loglikelihood",
                "num_fewshot": str(run.config.num_fewshot or 0), "limit": str(run.config.limit),
                "split": run.config.split or "official"}},
        "eval_library": {"name": "evalita-eval", "version": run.package_versions.get("evalita-llm") or "unknown"},
        "model_info": _model_info(run, developer, model_id), "evaluation_results": _results(run, reports, stamp)}
    if lines:
        aggregate["detailed_evaluation_results"] = {
            "format": "jsonl", "file_path": rel, "hash_algorithm": "sha256",
            "checksum": hashlib.sha256(samples_bytes).hexdigest(), "total_rows": len(lines)}
    validate(aggregate, "eval.schema.json", str(folder / f"{run_id}.json"))
    aggregate_bytes = (json.dumps(aggregate, ensure_ascii=False, indent=2, sort_keys=True) + "\n").encode("utf-8")
    files = {folder / f"{run_id}.json": aggregate_bytes, **({out / rel: samples_bytes} if lines else {})}
    check_publishable([(str(p), data) for p, data in files.items()], replacements)
    folder.mkdir(parents=True, exist_ok=True)
    for p, data in files.items():
        p.write_bytes(data)
    return list(files)

"""Scores a model page may carry: ``.eval_results/*.yaml`` (the Hub's format) and the older ``model-index``, written
only for a run that is *the* model's score (docs/push-results.md, "Model-page files"); :func:`model_page_refusal`
says why another run gets none. One file per setting, one entry per task: the CPS of its headline metric."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import yaml

from evalita_data.hub.layout import RepoFile

from ..record.model import RunRecord
from ..naming import display_name
from ..reporting.facts import setting_label
from ..reporting.task_report import build_task_report, task_order
from ..reporting.tables import fmt
from ..reporting.unparsed_flag import none_read, none_read_summary


def yaml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def official_datasets(run: RunRecord) -> dict[str, tuple[str, str]]:
    """task -> (Hub dataset id, revision) for the tasks read from the official Hub datasets."""
    from evalita_data.registry import task_of_entry

    revisions = run.data.revisions
    found = {}
    for task in run.results:
        spec = task_of_entry(task)
        if spec is None or spec.hub_splits is None:
            continue
        dataset = next((r for r in sorted(revisions) if r.split("/", 1)[-1] == spec.hub_splits.dataset), None)
        if dataset is not None:
            found[task] = (dataset, str(revisions[dataset]))
    return found


def model_page_refusal(run: RunRecord) -> str | None:
    """Why this run may not be copied to a model page, or None when it may."""
    if run.partial:
        return f"{run.status_text}: a model page carries complete runs only"
    if run.config.limit is not None:
        return f"run with --limit {run.config.limit}: a score on the first items, not on the test set"
    if run.config.split:
        return f"evaluated on split {run.config.split!r}, not the official one"
    if reasons := run.not_comparable_reasons:  # model pages: the paper's evaluation only (derived, not the file's flag)
        return "not comparable with the paper: " + "; ".join(reasons)
    if not run.data.revisions:
        return "data not read from the official Hub datasets (run --data hf:ORG): no dataset id and revision to name"
    missing = sorted(set(run.results) - set(official_datasets(run)))
    if missing:
        return f"task(s) {', '.join(missing)} not read from an official Hub dataset"
    if unknown := sorted(set(run.results) - set(BENCHMARK_TASK_IDS)):
        return (f"task(s) {', '.join(unknown)} are no task of the benchmark's eval.yaml "
                f"({', '.join(BENCHMARK_TASK_IDS)})")
    return None


# Our entries are the tasks of the benchmark's eval.yaml (written in each pushed dataset by `evalita-data push`).
BENCHMARK_TASK_IDS = ("wic", "te", "sa", "hs", "faq", "at", "ls", "ner_adg", "ner_fic", "ner_wn", "rel", "sum")
# Our headline metrics as Hub metric ids (hf.co/metrics); the CPS has none: "cps", documented in docs/push-results.md.
HUB_METRIC_TYPES = {"acc": "accuracy", "acc_norm": "accuracy",
                    **dict.fromkeys(("f1_macro", "f1_binary", "sentipolc_f1", "ls_f1", "ner_f1", "rel_f1"), "f1"),
                    **dict.fromkeys(("rouge1", "rouge2", "rougeL"), "rouge")}
CPS_METRIC_TYPE = "cps"


def benchmark_task_id(entry: str) -> str:
    """The id of the task of the benchmark dataset's ``eval.yaml`` that our entry ``entry`` is: the entry's own
    name (``te``, ``ner_adg``), the one mapping between our results and the Hub's task ids."""
    if entry not in BENCHMARK_TASK_IDS:
        raise ValueError(f"task {entry!r} is no task of the Evalita-LLM benchmark ({', '.join(BENCHMARK_TASK_IDS)})")
    return entry


def official_location(entry: str) -> tuple[str, str]:
    """(dataset config, split) of the official Hub dataset the entry is evaluated on: ``evalitahf/*``'s split names
    (``test_1``, ``reduced_test``, ``test_all``, ``test_100``) and configs (NER ``adg``/``fic``/``wn``)."""
    from evalita_data.registry import task_of_entry

    from ..sources.entries import all_entries

    spec = task_of_entry(entry)
    hub = spec.hub_splits if spec is not None else None
    if hub is None:
        raise ValueError(f"task {entry!r} has no official Hub dataset (TaskSpec.hub_splits)")
    config = hub.config or next((e.config for e in all_entries() if e.name == entry and e.config), None) or "default"
    return config, hub.test


def _task_scores(run: RunRecord) -> list[dict]:
    rows = []
    datasets = official_datasets(run)
    for task in task_order(set(run.results)):
        rep = build_task_report(task, [run])
        t = rep.table
        ns = sorted({v["n"] for v in run.results[task].values()})  # counts (record/results.schema.json)
        (config, split), (dataset, revision) = official_location(task), datasets[task]
        rows.append({"task": task, "task_id": benchmark_task_id(task), "dataset": dataset, "revision": revision,
                     "config": config, "split": split, "metric": rep.metric, "prompts": len(t.prompts),
                     "by_prompt": {p: float(fmt(v, t.scale)) for p, v in zip(t.prompts, t.scores[:, 0])},
                     "n": "–".join(str(n) for n in sorted({ns[0], ns[-1]})) if ns else "?",
                     "value": float(fmt(t.stats().per_model[0].cps, t.scale)),
                     "unread": none_read_summary([p for p, scores in run.results[task].items() if none_read(scores)])})
    return rows


def _note(run: RunRecord, row: dict, date: str) -> str:
    return (f"Evalita-LLM {setting_label(run.config)}, {run.config.num_fewshot or 0}-shot: CPS (combined performance "
            f"score) of {row['metric']} over {row['prompts']} prompts, n={row['n']} items per prompt, complete run on "
            f"the official split ({row['config']}/{row['split']}), evaluated {date} (evalita-eval)"
            + (f"; the CPS includes {row['unread']}" if row["unread"] else ""))


def eval_results_yaml(run: RunRecord, url: str, date: str) -> str:
    """``.eval_results/*.yaml`` (huggingface_hub's EvalResultEntry): per task, its CPS under the benchmark's task id."""
    from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml

    entries = [EvalResultEntry(dataset_id=row["dataset"], task_id=row["task_id"], value=row["value"], date=date,
                               dataset_revision=row["revision"], source_url=url, source_name="evalita-eval results",
                               notes=_note(run, row, date)) for row in _task_scores(run)]
    return yaml.safe_dump(eval_result_entries_to_yaml(entries), sort_keys=False, allow_unicode=True, width=10_000)


def model_index_yaml(run: RunRecord, url: str, date: str) -> str:
    """The ``model-index`` block of a model card's YAML header (paste it there; huggingface_hub's EvalResult): per
    task, its CPS (custom type ``cps``) and the headline metric of each prompt (the Hub's metric ids). The model is
    named as every output names it (a local folder: by --model-name; give the Hub id it will be published as)."""
    from huggingface_hub import EvalResult
    from huggingface_hub.repocard_data import eval_results_to_model_index

    results = []
    for row in _task_scores(run):
        common = {"task_type": "text-generation", "task_name": f"Evalita-LLM {row['task']}",
                  "dataset_type": row["dataset"], "dataset_name": f"Evalita-LLM {row['task']}",
                  "dataset_config": row["config"], "dataset_split": row["split"], "dataset_revision": row["revision"],
                  "source_name": "evalita-eval results", "source_url": url}
        results.append(EvalResult(**common, metric_type=CPS_METRIC_TYPE, metric_name=f"CPS of {row['metric']}",
                                  metric_value=row["value"]))
        results += [EvalResult(**common, metric_type=HUB_METRIC_TYPES.get(row["metric"], row["metric"]),
                               metric_name=f"{row['metric']} {prompt}", metric_value=value,
                               metric_args={"average": "macro"} if row["metric"] == "f1_macro" else None)
                    for prompt, value in row["by_prompt"].items()]
    index = {"model-index": eval_results_to_model_index(display_name(run.model), results)}
    return yaml.safe_dump(index, sort_keys=False, allow_unicode=True, width=10_000)


def model_page_files(run: RunRecord, folder: str, repo_id: str) -> list[RepoFile]:
    """``<folder>/.eval_results/evalita-llm_<setting>-<run id>.yaml``, ``<folder>/model-index.yaml``; [] if refused."""
    if model_page_refusal(run) is not None:
        return []
    url = f"https://huggingface.co/datasets/{repo_id}/tree/main/{folder}"
    # The day (UTC) results.json was last written: when the run finished.
    date = datetime.fromtimestamp(run.path.stat().st_mtime, tz=timezone.utc).strftime("%Y-%m-%d")
    setting = folder.split("/", 1)[-1]
    return [RepoFile(f"{folder}/.eval_results/evalita-llm_{setting}.yaml", eval_results_yaml(run, url, date).encode()),
            RepoFile(f"{folder}/model-index.yaml", model_index_yaml(run, url, date).encode())]

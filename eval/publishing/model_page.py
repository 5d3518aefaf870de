"""Scores a model page may carry: ``.eval_results/*.yaml`` (the Hub's format) and the older ``model-index``.

Copied to a model repository, these files put a number on the model's page as *the* model's
score on a benchmark. So they are written only for a run that is that score: complete (every
planned task), without ``--limit``, on the official split, over the official Hub datasets
(``run --data hf:ORG``, whose ids and revisions they name). Any other run gets none, and
:func:`model_page_refusal` says why (printed by ``push-results`` and written in the card).

One file per setting (the run folder is one model in one setting): one entry per task, the
CPS (combined performance score, the Evalita-LLM paper's per-task figure) of the task's
headline metric over its prompts; ``notes`` state the setting, that aggregate, n and the date.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from evalita_data.hub.layout import RepoFile

from ..reporting.runs import RunResults
from ..reporting.settings_view import setting_label
from ..reporting.task_report import build_task_report, task_order
from ..reporting.tables import fmt
from ..reporting.unparsed_flag import none_read, none_read_summary
from ..reporting.worth import recorded_reasons


def yaml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def official_datasets(run: RunResults) -> dict[str, tuple[str, str]]:
    """task -> (Hub dataset id, revision) for the tasks read from the official Hub datasets."""
    from evalita_data.registry import task_of_entry

    revisions = run.data.get("revisions") or {}
    found = {}
    for task in run.results:
        spec = task_of_entry(task)
        if spec is None or spec.hub_splits is None:
            continue
        dataset = next((r for r in sorted(revisions) if r.split("/", 1)[-1] == spec.hub_splits.dataset), None)
        if dataset is not None:
            found[task] = (dataset, str(revisions[dataset]))
    return found


def model_page_refusal(run: RunResults) -> str | None:
    """Why this run may not be copied to a model page, or None when it may."""
    if run.partial:
        return f"{run.status}: a model page carries complete runs only"
    if run.config.get("limit") is not None:
        return f"run with --limit {run.config['limit']}: a score on the first items, not on the test set"
    if run.config.get("split"):
        return f"evaluated on split {run.config['split']!r}, not the official one"
    if reasons := recorded_reasons(run.raw):  # a model page shows the paper's evaluation only
        return "not comparable with the paper: " + "; ".join(reasons)
    if not run.data.get("revisions"):
        return "data not read from the official Hub datasets (run --data hf:ORG): no dataset id and revision to name"
    missing = sorted(set(run.results) - set(official_datasets(run)))
    if missing:
        return f"task(s) {', '.join(missing)} not read from an official Hub dataset"
    return None


def run_date(run: RunResults) -> str:
    """The day the run's results.json was last written (UTC): when the run finished."""
    return datetime.fromtimestamp(run.path.stat().st_mtime, tz=timezone.utc).strftime("%Y-%m-%d")


def _task_scores(run: RunResults) -> list[dict]:
    rows = []
    datasets = official_datasets(run)
    for task in task_order(set(run.results)):
        rep = build_task_report(task, [run])
        ns = sorted({int(v["n"]) for v in run.results[task].values() if isinstance(v.get("n"), (int, float))})
        rows.append({"task": task, "dataset": datasets[task][0], "revision": datasets[task][1], "metric": rep.metric,
                     "prompts": len(rep.table.prompts), "n": "–".join(str(n) for n in sorted({ns[0], ns[-1]})) if ns else "?",
                     "value": fmt(rep.table.stats().per_model[0].cps, rep.table.scale),
                     "unread": none_read_summary([p for p, scores in run.results[task].items() if none_read(scores)])})
    return rows


def _setting_text(run: RunResults) -> str:
    return f"Evalita-LLM {setting_label(run.config)}, {run.config.get('num_fewshot') or 0}-shot"


def _note(run: RunResults, row: dict, date: str) -> str:
    return (f"{_setting_text(run)}: CPS (combined performance score) of {row['metric']} over {row['prompts']} prompts, "
            f"n={row['n']} items per prompt, complete run on the official split, evaluated {date} (evalita-eval)"
            + (f"; the CPS includes {row['unread']}" if row["unread"] else ""))


def eval_results_yaml(run: RunResults, url: str, date: str) -> str:
    lines = []
    for row in _task_scores(run):
        lines += ["- dataset:", f"    id: {yaml_str(row['dataset'])}", f"    task_id: {yaml_str(row['task'])}",
                  f"    revision: {yaml_str(row['revision'])}", f"  value: {row['value']}", f"  date: {yaml_str(date)}",
                  "  source:", f"    url: {yaml_str(url)}", "    name: \"evalita-eval results\"",
                  f"  notes: {yaml_str(_note(run, row, date))}"]
    return "\n".join(lines) + "\n"


def model_index_yaml(run: RunResults, model: str, url: str, date: str) -> str:
    """The ``model-index`` block of a model card's YAML header (paste it there)."""
    lines = ["model-index:", f"- name: {yaml_str(model)}", "  results:"]
    for row in _task_scores(run):
        name = f"Evalita-LLM {row['task']}"
        lines += [f"  # {_note(run, row, date)}", "  - task:", "      type: text-generation", f"      name: {yaml_str(name)}",
                  "    dataset:", f"      name: {yaml_str(name)}", f"      type: {yaml_str(row['dataset'])}",
                  f"      revision: {yaml_str(row['revision'])}",
                  "    metrics:", "    - type: cps", f"      name: {yaml_str('CPS of ' + row['metric'])}",
                  f"      value: {row['value']}", "      verified: false",
                  "    source:", f"      url: {yaml_str(url)}", "      name: \"evalita-eval results\""]
    return "\n".join(lines) + "\n"


def model_page_files(run: RunResults, folder: str, repo_id: str, model: str) -> list[RepoFile]:
    """``<folder>/.eval_results/evalita-llm_<setting>.yaml`` and ``<folder>/model-index.yaml``; none when refused."""
    if model_page_refusal(run) is not None:
        return []
    url = f"https://huggingface.co/datasets/{repo_id}/tree/main/{folder}"
    date = run_date(run)
    setting = folder.split("/", 1)[-1]
    return [RepoFile(f"{folder}/.eval_results/evalita-llm_{setting}.yaml", eval_results_yaml(run, url, date).encode("utf-8")),
            RepoFile(f"{folder}/model-index.yaml", model_index_yaml(run, model, url, date).encode("utf-8"))]

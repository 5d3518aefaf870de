"""``evalita-eval push-results``: one run's results, samples and a card as a Hub dataset.

As lm-eval's ``--hf_hub_log_args``: the run goes under ``<model>/`` of the repository
(``results.json``, ``samples/<task>_<prompt>.jsonl``), with a ``README.md`` card that shows
the per-task tables (prompts x metric, MinP/MaxP/AvgP/CPS, Sharpe) and the run's settings.
One commit, only additions and changes: nothing is ever deleted, other models' folders
are left alone. The publishing mechanics (plan, retries, one commit, the token never
printed) are those of ``evalita-data push``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable, Iterable, Sequence

from evalita_data.hub.names import check_repo_id
from evalita_data.hub.layout import RepoFile, TaskRepo, write_repo_dir
from evalita_data.hub.push import (DEFAULT_BRANCH, RETRY_DELAYS, HubUnreachable, PushError, RepoPlan, commit_plan, describe_plan,
                                dry_plan, plan_repo,
                                remote_state)

from ..naming import model_name, run_folder
from ..reporting.runs import RunResults, load_results
from ..reporting.task_report import build_task_report, task_order
from ..reporting.facts import NOT_COMPARABLE, baseline_cell, evaluated_n, run_rows, unparsed_cell
from ..reporting.settings_view import setting_label
from ..reporting.tables import TextTable, fmt
from ..reporting.unparsed_flag import EXPLAIN, MARK, flag_notes, is_flagged

STAT_COLUMNS = ("MinP", "MaxP", "AvgP", "CPS")

CARD = "README.md"


def model_folder(run: RunResults) -> str:
    """The repository folder of one run: ``<model>[@rev]/<setting>[-constrained][-<k>shot][-<split>]`` (naming.py)."""
    return run_folder(run.model, run.config)


def _yaml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def render_card(run: RunResults, folder: str, repo_id: str, other_runs: Sequence[str] = ()) -> str:
    """The dataset card: YAML header (one config per run folder), the run's settings and one row per task.

    ``other_runs``: folders of runs already in the repository, listed (and kept) beside this one."""
    run.display = model_name(run.model["name_or_path"])
    runs = sorted({folder, *other_runs})
    lines = ["---", "pretty_name: Evalita-LLM results", "tags:", "- evalita-llm", "- evaluation", "configs:"]
    for f in runs:
        lines += [f"- config_name: {_yaml_str(f.replace('/', '--'))}", f"  data_files: {_yaml_str(f + '/results.json')}"]
    lines += [
        "---",
        f"# Evalita-LLM results: {run.display}" + (f" ({NOT_COMPARABLE})" if run.config.get("split") else ""),
        "",
        f"Written by `evalita-eval push-results` to `{repo_id}`. Files of this run are under `{folder}/`: "
        "`results.json` (scores as fractions, settings, data hashes, baselines, answer rules) and "
        "`samples/<task>_<prompt>.jsonl` (every prediction).",
        "",
        "| setting | value |", "|---|---|",
    ]
    settings = [("model", run.model.get("name_or_path")), ("dtype", run.model.get("dtype")), ("backend", run.model.get("backend")),
                ("data", run.data.get("source"))]
    settings += run_rows(run.config, run.model, run.results, run.timing, run.status)
    settings += [(k, run.config.get(k)) for k in ("seed", "max_new_tokens")]
    lines += [f"| {k} | {'–' if v is None else str(v).replace('|', '/')} |" for k, v in settings]
    for repo, sha in sorted((run.data.get("revisions") or {}).items()):
        lines.append(f"| data revision {repo} | {sha} |")
    lines += ["", "## Scores (percent)", "",
              "One row per task: its headline metric on every prompt, then the multi-prompt statistics: MinP, MaxP and "
              "AvgP (minimum, maximum, mean over prompts), CPS (combined performance score) and the Sharpe score "
              "(mean penalised by the spread over prompts, α=1); see docs/statistics.md. Baselines on the same gold "
              "labels: chance (uniform random choice) and majority (always the most frequent gold class). Unparsed: "
              "generated answers no rule could read (counted wrong), k / n per prompt; " + EXPLAIN + ".", ""]
    rows, notes = [], []
    for task in task_order(set(run.results)):
        rep = build_task_report(task, [run])
        t, st = rep.table, rep.table.stats()
        pm = st.per_model[0].as_dict()
        prompts = ", ".join(f"{p} {fmt(v, t.scale)}" + (f" {MARK}" if is_flagged(run.results[task].get(p, {})) else "")
                            for p, v in zip(t.prompts, t.scores[:, 0]))
        base = (run.raw.get("baselines") or {}).get(task)
        rows.append([task, rep.metric, evaluated_n({task: run.results[task]}), prompts] + [fmt(pm[c], t.scale) for c in STAT_COLUMNS]
                    + [fmt(st.sharpe[0], t.scale), baseline_cell(base, "chance", rep.metric),
                       baseline_cell(base, "majority", rep.metric), unparsed_cell(run.results[task])])
        notes += [f"{task}: {n}" for n in t.notes] + flag_notes(task, run.results[task])  # issue 28: few parsed answers
    lines.append(TextTable(["task", "metric", "n", "by prompt"] + list(STAT_COLUMNS) + ["Sharpe", "chance", "majority", "unparsed"],
                           rows, text_cols=4).markdown())
    if run.config.get("split"):
        notes.append(f"evaluated on split {run.config['split']!r}, not the official one: {NOT_COMPARABLE}")
    if run.partial:
        notes.append(f"{run.status}: the other tasks are missing")
    lines += [""] + [f"Note: {n}" for n in notes]
    others = [f for f in runs if f != folder]
    if others:
        lines += ["", "## Other runs in this repository", ""] + [f"- `{f}/` (card: `{f}/README.md`)" for f in others]
    return "\n".join(lines).rstrip() + "\n"


def eval_results_files(run: RunResults, folder: str, repo_id: str) -> list[RepoFile]:
    """``.eval_results/<task>.yaml`` of the Hub's model-page format, one per task, for the headline score (CPS).

    Only where it applies: a run on the official Hub datasets (``run --data hf:ORG``), whose ids and revisions it
    names, on the official split. They go under ``<folder>/.eval_results/``; the model page reads them from the
    *model* repository (copy them there, e.g. in a pull request)."""
    revisions = run.data.get("revisions") or {}
    if not revisions or run.config.get("split"):
        return []
    from evalita_data.registry import task_of_entry

    files = []
    for task in task_order(set(run.results)):
        spec = task_of_entry(task)
        dataset = next((r for r in revisions if spec is not None and spec.hub_splits is not None
                        and r.split("/", 1)[-1] == spec.hub_splits.dataset), None)
        if dataset is None:
            continue
        rep = build_task_report(task, [run])
        cps = rep.table.stats().per_model[0].cps
        note = (f"{setting_label(run.config)}, {run.config.get('num_fewshot') or 0}-shot, CPS of {rep.metric} over "
                f"{len(rep.table.prompts)} prompts (evalita-eval)")
        text = "\n".join([
            "- dataset:", f"    id: {_yaml_str(dataset)}", f"    task_id: {_yaml_str(task)}",
            f"    revision: {_yaml_str(revisions[dataset])}", f"  value: {fmt(cps, rep.table.scale)}",
            "  source:", f"    url: {_yaml_str(f'https://huggingface.co/datasets/{repo_id}/tree/main/{folder}')}",
            "    name: \"evalita-eval results\"", f"  notes: {_yaml_str(note)}", ""])
        files.append(RepoFile(f"{folder}/.eval_results/{_slug_file(task)}.yaml", text.encode("utf-8")))
    return files


def _slug_file(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def results_repo(results_dir: Path, repo_id: str, echo: Callable[[str], None] = print,
                 other_runs: Sequence[str] = ()) -> TaskRepo:
    """Every file to publish for one run folder (``evalita-eval run --output-dir``)."""
    path = results_dir / "results.json"
    if not path.is_file():
        raise PushError(f"{path}: no results.json; run `evalita-eval run --output-dir {results_dir}` first")
    run = load_results(path, partial=True)
    folder = model_folder(run)
    card = render_card(run, folder, repo_id, other_runs).encode("utf-8")
    files = [RepoFile(CARD, card), RepoFile(f"{folder}/{CARD}", card), RepoFile(f"{folder}/results.json", path.read_bytes())]
    files += eval_results_files(run, folder, repo_id)
    missing = []
    for task, prompts in run.results.items():
        for prompt in prompts:
            sample = run.samples_path(task, prompt)
            if sample.is_file():
                files.append(RepoFile(f"{folder}/samples/{sample.name}", sample.read_bytes()))
            else:
                missing.append(f"{task}/{prompt}")
    if missing:  # scores without their samples (e.g. results.json from elsewhere): publish, but say so
        echo(f"note: {results_dir / 'samples'} has no samples of {', '.join(missing)}; only their scores are published")
    if run.partial:
        echo(f"note: {path}: {run.status}; its finished tasks are published, marked partial")
    return TaskRepo("results", repo_id, tuple(files))


def run_folders(paths: Iterable[str]) -> list[str]:
    """Run folders (``<model>/<setting>``) among a repository's file paths: those holding a results.json."""
    return sorted({p[: -len("/results.json")] for p in paths if p.endswith("/results.json") and p.count("/") == 2})


def push_results(results_dir: Path, repo_id: str, private: bool = False, revision: str = DEFAULT_BRANCH,
                 message: str | None = None, dry_run: bool = False, to_dir: Path | None = None, api=None,
                 delays: Sequence[float] = RETRY_DELAYS, echo: Callable[[str], None] = print) -> RepoPlan | None:
    """Publish one run; with ``to_dir`` write the repository layout there instead (offline)."""
    check_repo_id(repo_id)
    if to_dir is not None:
        existing = [str(p.relative_to(to_dir)) for p in to_dir.rglob("results.json")] if to_dir.is_dir() else []
        repo = results_repo(results_dir, repo_id, echo, run_folders(existing))
        written = write_repo_dir(repo, to_dir)
        echo(f"{to_dir}: {len(written)} file(s), {sum(len(f.data) for f in repo.files)} bytes")
        return None
    from huggingface_hub import HfApi, get_token

    api = api or HfApi()
    if not dry_run and (api.token or get_token()) is None:
        raise PushError("no Hub token: set HF_TOKEN or run 'hf auth login' (the token is never printed)")
    if dry_run:  # one attempt: a dry run without the Hub lists the local files at once
        try:
            _exists, _parent, remote = remote_state(api, repo_id, revision, delays=())
        except HubUnreachable as err:
            plan = dry_plan(api, results_repo(results_dir, repo_id, echo, []), revision, err.reason)
            describe_plan(plan, revision, dry_run, echo)
            echo(f"dry run without the Hub: the local files listed, none compared with {api.endpoint}; nothing sent")
            return plan
        plan = dry_plan(api, results_repo(results_dir, repo_id, echo, run_folders(remote)), revision, None)
        describe_plan(plan, revision, dry_run, echo)
        return plan
    _exists, _parent, remote = remote_state(api, repo_id, revision, delays)
    repo = results_repo(results_dir, repo_id, echo, run_folders(remote))
    plan = plan_repo(api, repo, revision, delays)
    describe_plan(plan, revision, dry_run, echo)
    if not dry_run:
        run = load_results(results_dir / "results.json", partial=True)
        commit_plan(api, plan, revision, private, message or f"evalita-eval push-results: {model_folder(run)}", delays, echo)
    return plan

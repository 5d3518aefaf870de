"""``evalita-eval push-results``: one run's results, samples and a card as a Hub dataset.

As lm-eval's ``--hf_hub_log_args``: the run goes under ``<model>/`` of the repository
(``results.json``, ``samples/<task>_<prompt>.jsonl``), with a ``README.md`` card that shows
the per-task tables (prompts x metric, MinP/MaxP/AvgP/CPS, Sharpe) and the run's settings.
One commit, only additions and changes: nothing is ever deleted, other models' folders
are left alone. The publishing mechanics (plan, retries, one commit, the token never
printed) are those of ``evalita-data push``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Sequence

from evalita_data.hub_names import check_repo_id
from evalita_data.layout import RepoFile, TaskRepo, write_repo_dir
from evalita_data.push import DEFAULT_BRANCH, RETRY_DELAYS, PushError, RepoPlan, _describe, commit_plan, plan_repo

from .report import RunResults, build_task_report, load_results, task_order
from .tables import TextTable, fmt

STAT_COLUMNS = ("MinP", "MaxP", "AvgP", "CPS")

CARD = "README.md"


def model_folder(run: RunResults) -> str:
    """The repository folder of one run: the model name, made path-safe."""
    name = run.model["name_or_path"].rstrip("/").split("/")[-1] or "model"
    rev = run.model.get("revision")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{name}@{rev}" if rev else name)


def render_card(run: RunResults, folder: str, repo_id: str) -> str:
    """The dataset card: YAML header, the run's settings and one paper table per task."""
    run.display = run.model["name_or_path"]
    lines = [
        "---",
        "pretty_name: Evalita-LLM results",
        "tags:", "- evalita-llm", "- evaluation",
        "configs:",
        "- config_name: results",
        f"  data_files: {folder}/results.json",
        "---",
        f"# Evalita-LLM results: {run.model['name_or_path']}",
        "",
        f"Written by `evalita-eval push-results` to `{repo_id}`. Files of this run are under `{folder}/`: "
        "`results.json` (scores as fractions, settings, data hashes) and `samples/<task>_<prompt>.jsonl` (every prediction).",
        "",
        "| setting | value |", "|---|---|",
    ]
    settings = {
        "model": run.model.get("name_or_path"), "revision": run.model.get("revision") or "main",
        "dtype": run.model.get("dtype"), "backend": run.model.get("backend"), "data": run.data.get("source"),
        **{k: run.config.get(k) for k in ("num_fewshot", "limit", "apply_chat_template", "seed", "max_new_tokens")},
    }
    lines += [f"| {k} | {'–' if v is None else v} |" for k, v in settings.items()]
    for repo, sha in sorted((run.data.get("revisions") or {}).items()):
        lines.append(f"| data revision {repo} | {sha} |")
    lines += ["", "## Scores (percent)", "",
              "One row per task: its headline metric on every prompt, then the multi-prompt statistics: MinP, MaxP and "
              "AvgP (minimum, maximum, mean over prompts), CPS (combined performance score) and the Sharpe score "
              "(mean penalised by the spread over prompts, α=1); see docs/statistics.md.", ""]
    rows, notes = [], []
    for task in task_order(set(run.results)):
        rep = build_task_report(task, [run])
        t, st = rep.table, rep.table.stats()
        pm = st.per_model[0].as_dict()
        prompts = ", ".join(f"{p} {fmt(v, t.scale)}" for p, v in zip(t.prompts, t.scores[:, 0]))
        rows.append([task, rep.metric, prompts] + [fmt(pm[c], t.scale) for c in STAT_COLUMNS]
                    + [fmt(st.sharpe[0], t.scale)])
        notes += [f"{task}: {n}" for n in t.notes]
    lines.append(TextTable(["task", "metric", "by prompt"] + list(STAT_COLUMNS) + ["Sharpe"], rows, text_cols=3).markdown())
    lines += [""] + [f"Note: {n}" for n in notes]
    return "\n".join(lines).rstrip() + "\n"


def results_repo(results_dir: Path, repo_id: str, echo: Callable[[str], None] = print) -> TaskRepo:
    """Every file to publish for one run folder (``evalita-eval run --output-dir``)."""
    path = results_dir / "results.json"
    if not path.is_file():
        raise PushError(f"{path}: no results.json; run `evalita-eval run --output-dir {results_dir}` first")
    run = load_results(path)
    folder = model_folder(run)
    files = [RepoFile(CARD, render_card(run, folder, repo_id).encode("utf-8")),
             RepoFile(f"{folder}/results.json", path.read_bytes())]
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
    return TaskRepo("results", repo_id, tuple(files))


def push_results(results_dir: Path, repo_id: str, private: bool = False, revision: str = DEFAULT_BRANCH,
                 message: str | None = None, dry_run: bool = False, to_dir: Path | None = None, api=None,
                 delays: Sequence[float] = RETRY_DELAYS, echo: Callable[[str], None] = print) -> RepoPlan | None:
    """Publish one run; with ``to_dir`` write the repository layout there instead (offline)."""
    repo = results_repo(results_dir, check_repo_id(repo_id), echo)
    if to_dir is not None:
        written = write_repo_dir(repo, to_dir)
        echo(f"{to_dir}: {len(written)} file(s), {sum(len(f.data) for f in repo.files)} bytes")
        return None
    from huggingface_hub import HfApi, get_token

    api = api or HfApi()
    if not dry_run and (api.token or get_token()) is None:
        raise PushError("no Hub token: set HF_TOKEN or run 'hf auth login' (the token is never printed)")
    plan = plan_repo(api, repo, revision, delays)
    _describe(plan, revision, dry_run, echo)
    if not dry_run:
        run = load_results(results_dir / "results.json")
        commit_plan(api, plan, revision, private, message or f"evalita-eval push-results: {run.model['name_or_path']}", delays, echo)
    return plan

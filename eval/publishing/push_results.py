"""``evalita-eval push-results``: one run's results, samples and a card as a Hub dataset, under its default folder name,
one commit of additions only, the mechanics of ``evalita-data push`` (docs/push-results.md); and the repository's front
page (its root ``README.md``): every run pushed there, read back from its ``results.json`` at every push, and the
dataset viewer's YAML header."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from evalita_data.hub.names import check_repo_id
from evalita_data.hub.layout import RepoFile, TaskRepo, write_repo_dir
from evalita_data.hub.push import (DEFAULT_BRANCH, RETRY_DELAYS, HubUnreachable, PushError, RepoPlan, commit_plan,
                                   describe_plan, dry_plan, plan_repo, remote_state, with_retries)

from ..naming import run_folder
from ..record import RecordError, RunRecord, parse_record, read_run, run_id
from ..record.read import json_document, record_text
from ..reporting.tables import Markdown, TextTable, fmt, md_text
from ..reporting.task_report import build_task_report, task_order
from ..reporting.facts import NOT_COMPARABLE, baseline_cell, evaluated_n, run_rows, setting_label, unparsed_cell
from ..reporting.worth import MIN_ITEMS, NOT_A_MEASUREMENT
from .model_page import model_page_files, model_page_refusal, yaml_str
from .public import LocalPathLeft, check_publishable, model_label, public_lines, public_record
from ..reporting.unparsed_flag import EXPLAIN, flag_mark, flag_notes, none_read, none_read_summary

STAT_COLUMNS = ("MinP", "MaxP", "AvgP", "CPS")

CARD = "README.md"


def render_card(run: RunRecord, folder: str, repo_id: str) -> str:
    """The run's own card (``<folder>/README.md``): its settings and one row per task (``run``: its published form)."""
    run.display = model_label(run.model)
    flag = f" ({NOT_COMPARABLE})" if run.not_comparable_reasons else ""
    lines = [f"# Evalita-LLM results: {md_text(run.display)}{flag}", "",
             f"Written by `evalita-eval push-results` to `{repo_id}`. Files of this run are under `{folder}/`: "
             "`results.json` (scores as fractions, settings, data hashes, baselines, answer rules) and "
             "`samples/<task>_<prompt>.jsonl` (every prediction). Every run of the repository: its front page "
             "(`README.md`).", "", "| setting | value |", "|---|---|"]
    data = run.data.source + (" (local folder)" if run.data.local_folder else "") if run.data.source else None
    settings = [("model", run.display), ("dtype", run.model.dtype), ("backend", run.model.backend), ("data", data)]
    settings += run_rows(run) + [("seed", run.config.seed), ("max_new_tokens", run.config.max_new_tokens)]
    settings += [(f"data revision {repo}", sha) for repo, sha in sorted(run.data.revisions.items())]
    refusal = model_page_refusal(run)
    lines += [f"| {md_text(k)} | {'–' if v is None else md_text(v)} |" for k, v in settings]
    files = "`.eval_results/`, `model-index.yaml`" if refusal is None else md_text(f"none: {refusal}")
    lines.append(f"| model page files | {files} |")
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
        prompts = ", ".join(f"{p} {fmt(v, t.scale)}" + flag_mark(run.results[task].get(p, {}))
                            for p, v in zip(t.prompts, t.scores[:, 0]))
        base = run.baselines.get(task)
        rows.append([task, rep.metric, evaluated_n({task: run.results[task]}), prompts]
                    + [fmt(pm[c], t.scale) for c in STAT_COLUMNS] + [fmt(st.sharpe[0], t.scale)]
                    + [baseline_cell(base, b, rep.metric) for b in ("chance", "majority")]
                    + [unparsed_cell(run.results[task])])
        notes += [f"{task}: {n}" for n in t.notes]
        if (ns := [p["n"] for p in run.results[task].values()]) and min(ns) < MIN_ITEMS:  # the prompts' items
            notes.append(f"{task}: n={int(min(ns))}, {NOT_A_MEASUREMENT}")
        notes += flag_notes(task, run.results[task])
        if unread := none_read_summary([p for p, scores in run.results[task].items() if none_read(scores)]):
            notes.append(f"{task}: its {', '.join(STAT_COLUMNS)} and Sharpe include {unread}")
    columns = ["task", "metric", "n", "by prompt"] + list(STAT_COLUMNS) + ["Sharpe", "chance", "majority", "unparsed"]
    lines.append(TextTable(columns, rows, text_cols=4).markdown())
    if reasons := run.not_comparable_reasons:  # derived from the recorded config, never the file's flag
        notes.append(f"{NOT_COMPARABLE}: {'; '.join(reasons)}")
    notes += run.notes
    if run.partial:
        notes.append(f"{run.status_text}: the other tasks are missing")
    lines += [""] + [f"Note: {md_text(n)}" for n in notes]
    return "\n".join(lines).rstrip() + "\n"


def run_row(folder: str, run: RunRecord | str) -> list[str]:
    """One line of the front page; a results.json that cannot be read (``run``: why) says so in the status."""
    # A link only to a folder of naming.run_folder's path-safe characters (a peer's repository may hold any other).
    safe = re.fullmatch(r"[\w.@-]+/[\w.@-]+", folder, re.ASCII)
    link = Markdown(f"[`{folder}/`]({folder}/README.md)") if safe else folder
    if isinstance(run, str):
        return [link, "?", "?", "?", "?", run, "?"]
    config = run.config
    refusal = model_page_refusal(run)
    return [link, model_label(run.model), f"{setting_label(config)}, {config.num_fewshot or 0}-shot",
            config.split or "official", "all" if config.limit is None else str(config.limit),
            f"{run.status_text}, {len(run.results)} task(s)",
            "yes (.eval_results, model-index.yaml)" if refusal is None else f"no: {refusal}"]


def render_front_page(repo_id: str, runs: Mapping[str, RunRecord | str]) -> str:
    """The root README.md of a results repository holding ``runs`` (folder -> its published record, or why it
    cannot be read)."""
    folders = sorted(runs)
    lines = ["---", "pretty_name: Evalita-LLM results", "tags:", "- evalita-llm", "- evaluation", "configs:"]
    for f in folders:
        lines += [f"- config_name: {yaml_str(f.replace('/', '--'))}", f"  data_files: {yaml_str(f + '/results.json')}"]
    lines += [
        "---", "# Evalita-LLM results", "",
        f"Runs of `evalita-eval run` pushed to `{repo_id}` by `evalita-eval push-results`, one folder per model and "
        "setting and run (`<model>/<setting>-<run id>`, the run's default local folder: a second run of the same model "
        "and setting is listed beside the first, never replaces it): `results.json` (scores, settings, data hashes), "
        "`samples/` (every prediction) and the run's card "
        "`README.md` with its per-task tables. Model page: whether the run's scores may be copied to the model's "
        "page (`.eval_results/*.yaml`, `model-index.yaml`): only complete runs of every item of the official splits.",
        "",
        TextTable(["run", "model", "setting", "split", "limit", "status", "model page"],
                  [run_row(f, runs[f]) for f in folders], text_cols=7).markdown(),
    ]
    return "\n".join(lines).rstrip() + "\n"


def results_repo(results_dir: Path, repo_id: str, echo: Callable[[str], None] = print,
                 other_runs: Mapping[str, RunRecord | str] | None = None, model_name: str | None = None) -> TaskRepo:
    """Every file to publish for one run folder; ``other_runs``: those already in the repository (folder -> its
    record, or why it cannot be read), listed on the front page."""
    path = results_dir / "results.json"
    if not path.is_file():
        raise PushError(f"{path}: no results.json; run `evalita-eval run --output-dir {results_dir}` first")
    checked = read_run(path, partial=True)  # every check of the run record (record/read.py), with its messages
    run, replacements = public_record(checked, model_name, results_dir)  # no local path; the model as named
    # The run's default folder name (naming.run_folder): the run id its published identity hashes to; a record with
    # none (older) is named by the hash of its published content.
    folder = run_folder(run.model, run.config, run.run_id if run.identity is not None else run_id(run.to_json()))
    files = [RepoFile(CARD, render_front_page(repo_id, {**(other_runs or {}), folder: run}).encode("utf-8")),
             RepoFile(f"{folder}/{CARD}", render_card(run, folder, repo_id).encode("utf-8")),
             RepoFile(f"{folder}/results.json", record_text(run).encode("utf-8"))]
    files += model_page_files(run, folder, repo_id)
    for note in run.notes:  # what the reader found: a stored flag its config contradicts
        echo(f"note: {path}: {note}")
    if (refusal := model_page_refusal(run)) is not None:
        echo(f"note: no .eval_results or model-index.yaml for {folder}: {refusal}")
    missing = []
    for task, prompts in run.results.items():
        for prompt in prompts:
            lines = run.samples.get((task, prompt))
            if lines is not None:  # read and checked with the run
                name = run.samples_path(task, prompt).name
                files.append(RepoFile(f"{folder}/samples/{name}", public_lines(lines, replacements)))
            else:
                missing.append(f"{task}/{prompt}")
    if missing:  # scores without their samples (e.g. results.json from elsewhere): publish, but say so
        echo(f"note: {results_dir / 'samples'} has no samples of {', '.join(missing)}; only their scores are published")
    if run.partial:
        echo(f"note: {path}: {run.status_text}; its finished tasks are published, "
             "marked partial")
    try:
        check_publishable([(f.path, f.data) for f in files], replacements)
    except LocalPathLeft as err:
        raise PushError(str(err)) from None
    return TaskRepo("results", repo_id, tuple(files))


def run_folders(paths: Iterable[str]) -> list[str]:
    """Run folders (``<model>/<setting>``) among a repository's file paths: those holding a results.json."""
    return sorted({p[: -len("/results.json")] for p in paths if p.endswith("/results.json") and p.count("/") == 2})


def _read_run(folder: str, read: Callable[[], bytes]) -> RunRecord | str:
    """The record of a run already in the repository (its scores, not its samples), or why it cannot be read."""
    try:
        doc = json_document("results.json", read())  # a key given twice or nesting too deep: unreadable, not a crash
    except (OSError, ValueError):
        return "results.json unreadable"
    try:
        return parse_record(Path(folder) / "results.json", doc, partial=True, samples=False)
    except RecordError as err:
        return f"not a results.json of evalita-eval ({str(err)[:80]})"


def remote_runs(api, repo_id: str, head: str | None, paths: Iterable[str],
                delays: Sequence[float]) -> dict[str, RunRecord | str]:
    """The runs already in the Hub repository: folder -> its record (or why it cannot be read), read at ``head``."""
    from huggingface_hub import hf_hub_download

    def read(folder: str) -> bytes:
        local = with_retries(f"{api.endpoint}/datasets/{repo_id}: read {folder}/results.json",
                             lambda: hf_hub_download(repo_id, f"{folder}/results.json", repo_type="dataset",
                                                     revision=head, endpoint=api.endpoint, token=api.token), delays)
        return Path(local).read_bytes()

    return {f: _read_run(f, lambda f=f: read(f)) for f in run_folders(paths)}


def push_results(results_dir: Path, repo_id: str, private: bool = False, revision: str = DEFAULT_BRANCH,
                 message: str | None = None, dry_run: bool = False, to_dir: Path | None = None, api=None,
                 delays: Sequence[float] = RETRY_DELAYS, echo: Callable[[str], None] = print,
                 model_name: str | None = None) -> RepoPlan | None:
    """Publish one run; with ``to_dir`` write the repository layout there instead (offline)."""
    check_repo_id(repo_id)
    if to_dir is not None:  # the runs already there: listed on the front page
        paths = [str(p.relative_to(to_dir)) for p in to_dir.rglob("results.json")] if to_dir.is_dir() else []
        others = {f: _read_run(f, (to_dir / f / "results.json").read_bytes) for f in run_folders(paths)}
        repo = results_repo(results_dir, repo_id, echo, others, model_name)
        written = write_repo_dir(repo, to_dir)
        echo(f"{to_dir}: {len(written)} file(s), {sum(len(f.data) for f in repo.files)} bytes")
        return None
    from huggingface_hub import HfApi, get_token

    api = api or HfApi()
    if not dry_run and (api.token or get_token()) is None:
        raise PushError("no Hub token: set HF_TOKEN or run 'hf auth login' (the token is never printed)")
    delays = () if dry_run else delays  # one attempt: a dry run without the Hub lists the local files at once
    try:
        _exists, parent, remote = remote_state(api, repo_id, revision, delays)
    except HubUnreachable as err:
        if not dry_run:
            raise
        plan = dry_plan(api, results_repo(results_dir, repo_id, echo, {}, model_name), revision, err.reason)
        describe_plan(plan, revision, dry_run, echo)
        echo(f"dry run without the Hub: the local files listed, none compared with {api.endpoint}; nothing sent")
        return plan
    repo = results_repo(results_dir, repo_id, echo, remote_runs(api, repo_id, parent, remote, delays), model_name)
    plan = dry_plan(api, repo, revision, None) if dry_run else plan_repo(api, repo, revision, delays)
    describe_plan(plan, revision, dry_run, echo)
    if not dry_run:
        [folder] = run_folders(f.path for f in repo.files)
        commit_plan(api, plan, revision, private, message or f"evalita-eval push-results: {folder}", delays, echo)
    return plan

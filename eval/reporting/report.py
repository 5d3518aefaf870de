"""``evalita-eval report``: multi-prompt tables, bootstrap CIs, rank scores and plots
from results.json files of ``evalita-eval run`` (format: docs/statistics.md)."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from . import stats
from .plots import heatmap_png, rank_vs_alpha_png
from .facts import NOT_COMPARABLE, check_run_extras, items_table, partial_counts, run_rows, status_text
from .settings_view import labels_of, setting_label, settings_table
from .tables import (ScoreRow, ScoresError, TaskTable, TextTable, build_tables, fmt, natural_key, paper_table,
                     resolve_scale, table_json)

PERCENT = 100.0  # report tables are in percent, as the paper's
# (metric name, samples, task=entry name) -> score; the default resolves the name through the task's declaration.
ScoreSamples = Callable[..., float]


@dataclass
class RunResults:
    """One results.json: one model, its tasks and prompts."""

    path: Path
    model: dict
    data: dict
    config: dict
    results: dict  # task -> prompt -> metric -> value (fraction), plus "n"
    timing: dict
    display: str = ""
    raw: dict = field(default_factory=dict)  # the whole results.json (baselines, parsed_by, tasks, status)

    @property
    def status(self) -> str:
        return status_text(self.raw.get("status"), self.raw.get("tasks"), self.results)

    @property
    def partial(self) -> bool:
        return (self.raw.get("status") or "complete") != "complete"

    def samples_path(self, task: str, prompt: str) -> Path:
        return self.path.parent / "samples" / f"{task}_{prompt}.jsonl"


def load_results(path: Path, partial: bool = False) -> RunResults:
    """One results.json; an unfinished run only with ``partial`` (its finished tasks)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ScoresError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    if not isinstance(data, dict):
        raise ScoresError(f"{path}: expected a results.json object, got {type(data).__name__}")
    for key in ("model", "results"):
        if not isinstance(data.get(key), dict):
            raise ScoresError(f"{path}: missing object {key!r}; expected the results.json of `evalita-eval run`")
    if data.get("status") == "empty":
        skipped = data.get("skipped") if isinstance(data.get("skipped"), dict) else {}
        raise ScoresError(f"{path}: a run that evaluated nothing ({len(skipped)} task(s) skipped: "
                          f"{'; '.join(f'{k}: {v}' for k, v in list(skipped.items())[:3])}); nothing to report")
    if data.get("status", "complete") != "complete" and not partial:
        # Written after every task by `run`: an interrupted or killed run has only some tasks.
        raise ScoresError(f"{path}: an unfinished run (status {data.get('status')!r}, "
                          f"{partial_counts(data.get('tasks') if isinstance(data.get('tasks'), dict) else None, data['results'])}); "
                          "run the same `evalita-eval run` command again to complete it, or report its finished tasks with --partial")
    if not data["model"].get("name_or_path"):
        raise ScoresError(f"{path}: model.name_or_path is missing")
    for task, prompts in data["results"].items():
        if not isinstance(prompts, dict) or not all(isinstance(v, dict) for v in prompts.values()):
            raise ScoresError(f"{path}: results.{task} must map prompt -> {{metric: value}}")
    try:
        check_run_extras(path, data)
    except ValueError as err:
        raise ScoresError(str(err)) from None
    return RunResults(path, data["model"], data.get("data") or {}, data.get("config") or {}, data["results"],
                      data.get("timing") or {}, raw=data)


def assign_display_names(runs: Sequence[RunResults]) -> None:
    """Basename of model.name_or_path; the full name, then @revision, then #i where equal."""
    names = [r.model["name_or_path"].rstrip("/").split("/")[-1] for r in runs]
    for widen in (lambda i: runs[i].model["name_or_path"],
                  lambda i: f"{runs[i].model['name_or_path']}@{runs[i].model.get('revision') or 'main'}"):
        names = [widen(i) if names.count(n) > 1 else n for i, n in enumerate(names)]
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        seen[n] = seen.get(n, 0) + 1
        runs[i].display = n if names.count(n) == 1 else f"{n} #{seen[n]}"


def headline_metric(task: str, available: Sequence[str]) -> tuple[str, str | None]:
    """(metric, note): the first metric of the task's declaration, else the first reported one."""
    from evalita_data.registry import task_of_entry

    spec = task_of_entry(task)
    if spec is not None:
        declared = spec.metrics[0].name
        if declared in available:
            return declared, None
        return available[0], f"headline metric {declared!r} of task {spec.id} not in the results; using {available[0]!r}"
    return available[0], f"task {task!r} is not in the registry; headline metric = first reported, {available[0]!r}"


def task_order(tasks: set[str]) -> list[str]:
    """Registry order (the paper's), entries of one task together; unknown names last."""
    from evalita_data.registry import task_ids, task_of_entry

    rank = {t: i for i, t in enumerate(task_ids())}

    def key(name: str) -> tuple[int, list]:
        spec = task_of_entry(name)
        return (rank[spec.id] if spec is not None else len(rank), natural_key(name))

    return sorted(tasks, key=key)


@dataclass
class TaskReport:
    table: TaskTable
    metric: str
    # (model, prompt) -> bootstrap of the metric, in percent; empty when omitted.
    cells: dict[tuple[str, str], stats.BootstrapResult] = field(default_factory=dict)
    # model -> bootstrap scores of AvgP (percent), when every cell was bootstrapped.
    avg_scores: dict[str, np.ndarray] = field(default_factory=dict)
    rank_basis: str = "the per-prompt scores (Welch t-test across prompts; no bootstrap)"
    items: TextTable | None = None  # n, limit, baselines, unparsed k / n and answer rules per model


def build_task_report(task: str, runs: Sequence[RunResults]) -> TaskReport:
    task_runs = [r for r in runs if task in r.results]
    available = list(dict.fromkeys(m for r in task_runs for p in r.results[task].values() for m in p if m not in ("n", "unparsed")))
    if not available:
        raise ScoresError(f"task {task!r}: no metric in any results file")
    metric, note = headline_metric(task, available)
    rows = []
    for r in task_runs:
        for prompt, metrics in r.results[task].items():
            if metric not in metrics:
                raise ScoresError(f"{r.path}: results.{task}.{prompt} has no {metric!r} (has {sorted(metrics)})")
            rows.append(ScoreRow(r.display, task, prompt, float(metrics[metric]), f"{r.path}: results.{task}.{prompt}.{metric}"))
    resolve_scale(rows, "fraction")  # results.json holds fractions: check, then show percent
    table = build_tables([ScoreRow(x.model, x.task, x.prompt, x.score * PERCENT, x.where) for x in rows], PERCENT)[0]
    if note:
        table.notes.append(note)
    _check_comparable(task, task_runs, table)
    return TaskReport(table, metric)


def _check_comparable(task: str, runs: Sequence[RunResults], table: TaskTable) -> None:
    """Scores of different data or settings are not comparable: say so in the report."""
    shas = {json.dumps((r.data.get("manifest_sha256") or {}).get(task), sort_keys=True) for r in runs}
    if len(shas) > 1:
        table.notes.append("the models were evaluated on different data (manifest_sha256 differs): scores are not comparable")
    for key in ("num_fewshot", "limit", "apply_chat_template"):
        values = {json.dumps(r.config.get(key)) for r in runs}
        if len(values) > 1:
            table.notes.append(f"config.{key} differs between models: {', '.join(f'{r.display}={r.config.get(key)}' for r in runs)}")


def load_score_samples() -> ScoreSamples | None:
    try:
        from ..metrics import score_samples  # written by the evaluator
    except ImportError:
        return None
    return score_samples


def add_bootstrap(rep: TaskReport, runs: Sequence[RunResults], score_samples: ScoreSamples, k: int, seed: int,
                  progress: bool = False) -> None:
    """Bootstrap every (model, prompt) cell from its samples file; a missing file or a
    metric that cannot be recomputed leaves the task without CIs and says why."""
    from tqdm import tqdm

    t = rep.table
    by_name = {r.display: r for r in runs}
    cells = {}
    todo = [(m, p) for m in t.models for p in t.prompts]
    for model, prompt in tqdm(todo, desc=f"bootstrap {t.task}", disable=not progress, leave=False):
        path = by_name[model].samples_path(t.task, prompt)
        if not path.is_file():
            t.notes.append(f"bootstrap omitted: no samples file {path}")
            return
        samples = _read_samples(path)
        try:
            res = stats.bootstrap(samples, lambda s: PERCENT * score_samples(rep.metric, s, task=t.task), k=k, seed=seed)
        except (KeyError, ValueError, NotImplementedError) as err:
            t.notes.append(f"bootstrap omitted: cannot recompute {rep.metric!r} from samples ({err})")
            return
        cells[(model, prompt)] = res
    rep.cells = cells
    # Same seed and item count -> the same resampled items for every prompt, so the
    # per-resample average over prompts is a bootstrap of AvgP.
    rep.avg_scores = {m: np.mean([cells[(m, p)].scores for p in t.prompts], axis=0) for m in t.models}
    rep.rank_basis = f"bootstrap of AvgP (k={k})"


def _read_samples(path: Path) -> list[dict]:
    from evalita_data.jsonl import read_jsonl

    return [rec for _, rec in read_jsonl(path)]


# ---------------------------------------------------------------- summary


@dataclass
class Summary:
    models: list[str]
    tasks: list[str]
    rank_scores: dict[str, float]
    common_tasks: list[str]
    ranks_by_alpha: np.ndarray  # [alpha, model], over common_tasks


def summarize(reports: Sequence[TaskReport], models: list[str]) -> Summary:
    rank_input = {}
    for rep in reports:
        t = rep.table
        if len(t.models) < 2:
            continue  # a rank needs another model on the same task: alone, every run would be "best"
        rank_input[t.task] = rep.avg_scores or {m: t.model_scores(m) for m in t.models}
    rank_scores = stats.mean_rank_scores(rank_input)
    common = [rep for rep in reports if set(rep.table.models) == set(models)]
    if common:
        ranks = np.array([
            stats.rank_descending([np.mean([stats.sharpe_score(rep.table.model_scores(m), a, PERCENT) for rep in common])
                                   for m in models])
            for a in stats.ALPHAS])
    else:
        ranks = np.zeros((len(stats.ALPHAS), 0))
    return Summary(models, [r.table.task for r in reports], rank_scores, [r.table.task for r in common], ranks)


def summary_table(reports: Sequence[TaskReport], summary: Summary, alpha: float) -> TextTable:
    headers = ["model"] + [f"{r.table.task} CPS" for r in reports] + ["AvgP", "MaxP", "CPS", f"Sharpe α={alpha:g}", "rank score"]
    rows = []
    for m in summary.models:
        per_task, avg, mx, cps, sharpe = [], [], [], [], []
        for rep in reports:
            t = rep.table
            if m not in t.models:
                per_task.append("–")
                continue
            st = t.stats(alpha)
            j = t.models.index(m)
            per_task.append(fmt(st.per_model[j].cps, PERCENT))
            avg.append(st.per_model[j].avg)
            mx.append(st.per_model[j].max)
            cps.append(st.per_model[j].cps)
            sharpe.append(st.sharpe[j])
        means = [fmt(float(np.mean(v)), PERCENT) if v else "–" for v in (avg, mx, cps, sharpe)]
        rank = summary.rank_scores.get(m)
        rows.append([m] + per_task + means + [f"{rank:.2f}" if rank is not None else "–"])
    return TextTable(headers, rows)


def ci_cell(b: stats.BootstrapResult) -> str:
    """'mean ± EuroEval half-width (2.5th–97.5th percentile)'."""
    return f"{fmt(b.mean, PERCENT)} ± {fmt(b.ci_high - b.mean, PERCENT)} ({fmt(b.pct_low, PERCENT)}–{fmt(b.pct_high, PERCENT)})"


def ci_table(rep: TaskReport) -> TextTable:
    t = rep.table
    rows = [[p] + [ci_cell(rep.cells[(m, p)]) for m in t.models] for p in t.prompts]
    rows.append(["AvgP"] + [ci_cell(stats.summarize_bootstrap(rep.avg_scores[m])) for m in t.models])
    return TextTable(["prompt"] + t.models, rows, summary_from=len(t.prompts))


def runs_table(runs: Sequence[RunResults]) -> TextTable:
    """One row per run: the model and everything that changes its numbers (report_facts.run_rows)."""
    rows, headers = [], []
    for r in runs:
        facts = run_rows(r.config, r.model, r.results, r.timing, r.status)
        headers = [name for name, _ in facts]
        rows.append([r.display, r.model.get("name_or_path", ""), str(r.model.get("dtype") or ""), str(r.config.get("device", ""))]
                    + [value for _, value in facts] + [str(r.path)])
    headers = ["model", "name_or_path", "dtype", "device"] + headers + ["results file"]
    return TextTable(headers, rows, text_cols=len(headers))


def run_notes(runs: Sequence[RunResults]) -> list[str]:
    """Report-wide warnings: unfinished runs, non-official splits."""
    notes = [f"{r.display}: {r.status} (report --partial): its other tasks are missing" for r in runs if r.partial]
    notes += [f"{r.display}: evaluated on split {r.config['split']!r}, not the official one: {NOT_COMPARABLE}"
              for r in runs if r.config.get("split")]
    return notes


# ---------------------------------------------------------------- writing


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def write_report(paths: Sequence[Path], out: Path, k: int = 100, seed: int = 0, alpha: float = 1.0,
                 progress: bool = False, echo: Callable[[str], None] = print,
                 score_samples: ScoreSamples | None = None, partial: bool = False) -> list[Path]:
    """Write report.md, report.html (self-contained), report.json and plots/*.png into ``out``.

    ``partial``: an unfinished run's finished tasks are reported, marked as such."""
    runs = [load_results(Path(p), partial) for p in paths]
    # One table per (task, setting label); the same model in several settings side by side (settings_report).
    labels = labels_of(runs)
    for label in labels:
        group = [r for r in runs if setting_label(r.config) == label]
        assign_display_names(group)
        for r in group:
            # A non-official split is named in every table the run appears in.
            r.display += f" [split {r.config['split']}: {NOT_COMPARABLE}]" if r.config.get("split") else ""
            r.display += f" [{label}]" if len(labels) > 1 else ""
    models = [r.display for r in runs]
    tasks = task_order({t for r in runs for t in r.results})
    if not tasks:
        raise ScoresError("no task results in the given files")
    grouped = [(t, label, [r for r in runs if setting_label(r.config) == label]) for t in tasks for label in labels]
    reports = [build_task_report(t, group) for t, _label, group in grouped if any(t in r.results for r in group)]
    general_notes = run_notes(runs)
    if k > 0:
        scorer = score_samples or load_score_samples()
        if scorer is None:
            general_notes.append("bootstrap CIs omitted: evalita_eval.metrics.score_samples is not available")
        else:
            for rep in reports:
                add_bootstrap(rep, runs, scorer, k, seed, progress)
    present = [g for g in grouped if any(g[0] in r.results for r in g[2])]
    for rep, (t, _label, group) in zip(reports, present):
        rep.items = items_table(t, rep.metric, group)
        if any(r.config.get("split") and t in r.results for r in group):
            rep.table.notes.append(f"evaluated on a non-official split: {NOT_COMPARABLE}")
    if len(labels) > 1:
        for rep, (t, label, _group) in zip(reports, present):
            rep.table.task = f"{t} [{label}]"
    summary = summarize(reports, models)

    plots_dir = out / "plots"
    plots_dir.mkdir(parents=True, exist_ok=True)
    images: dict[str, bytes] = {}
    if len(models) > 1 and summary.common_tasks:
        images["rank_vs_alpha.png"] = rank_vs_alpha_png(
            models, stats.ALPHAS, summary.ranks_by_alpha,
            f"Rank by mean Sharpe score over {len(summary.common_tasks)} task(s) vs α")
    for rep in reports:
        images[f"heatmap_{_slug(rep.table.task)}.png"] = heatmap_png(rep.table, rep.metric)
    for name, png in images.items():
        (plots_dir / name).write_bytes(png)

    context = _context(runs, reports, summary, alpha, k, seed, general_notes)
    context["settings"] = settings_table(runs, tasks, headline_metric)
    md = _markdown(context)
    html = _html(context, images)
    (out / "report.md").write_text(md, encoding="utf-8")
    (out / "report.html").write_text(html, encoding="utf-8")
    payload = {
        "alpha": alpha, "bootstrap": {"k": k, "seed": seed}, "scale": PERCENT,
        "models": {r.display: {"model": r.model, "results_file": str(r.path)} for r in runs},
        "tasks": {rep.table.task: {"metric": rep.metric, "rank_basis": rep.rank_basis, **table_json(rep.table, alpha),
                                   "items": {"headers": rep.items.headers, "rows": rep.items.rows} if rep.items else None,
                                   "bootstrap": {f"{m}/{p}": {"mean": b.mean, "ci_low": b.ci_low, "ci_high": b.ci_high,
                                                              "pct_low": b.pct_low, "pct_high": b.pct_high}
                                                 for (m, p), b in rep.cells.items()}}
                  for rep in reports},
        "mean_rank_score": summary.rank_scores,
        "settings": {"headers": context["settings"].headers, "rows": context["settings"].rows} if context["settings"] else None,
        "notes": general_notes,
    }
    (out / "report.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return [out / "report.md", out / "report.html", out / "report.json", plots_dir]


def _context(runs, reports, summary, alpha, k, seed, notes) -> dict:
    sections = []
    for rep in reports:
        t = rep.table
        sections.append({
            "task": t.task, "metric": rep.metric, "table": paper_table(t, alpha),
            "ci": ci_table(rep) if rep.cells else None, "notes": t.notes, "rank_basis": rep.rank_basis, "items_table": rep.items,
            "heatmap": f"heatmap_{_slug(t.task)}.png",
        })
    return {
        "runs": runs_table(runs), "summary": summary_table(reports, summary, alpha), "sections": sections,
        "alpha": alpha, "k": k, "seed": seed, "notes": notes, "common_tasks": summary.common_tasks,
        "rank_plot": "rank_vs_alpha.png" if len(runs) > 1 and summary.common_tasks else None,
    }


EXPLAIN = (
    "Scores in percent. Per prompt (rows) across models and per model (columns) across prompts: "
    "MinP, MaxP, AvgP; Sat = 1 - (MaxP - AvgP) / 100; CPS = Sat × MaxP (Combined Performance Score). "
    "Sharpe = mean / (α × std / 100 + 1), population std over prompts. "
    "Rank score (EuroEval): per task, 1 for the best model, each next model adds |Δmean| / std of the models' means "
    "when a one-sided Welch t-test (p < 0.05) finds it worse; averaged over the tasks the model shares with another "
    "run (lower is better; – when it shares none)."
)


ITEMS_EXPLAIN = (
    "Items evaluated per prompt (n) and the limit; baselines of the headline metric on the same gold labels, in percent: "
    "chance (uniform random choice) and majority (always the most frequent gold class); generated answers that no rule "
    "could parse (counted wrong) as k / n per prompt, and how many each answer rule read (docs/settings.md)."
)


SETTINGS_EXPLAIN = (
    "Per model and task, each evaluation setting (docs/settings.md) with the multi-prompt statistics of the task's "
    "headline metric: AvgP [MinP–MaxP] CPS, and the answers no rule could parse (counted wrong)."
)


def _markdown(c: dict) -> str:
    out = ["# Evalita-LLM report", "", EXPLAIN, ""]
    out += [f"> note: {n}" for n in c["notes"]]
    out += ["", "## Models", "", c["runs"].markdown(), "", "## Summary", "",
            "Per-task CPS of each task's headline metric; AvgP, MaxP, CPS and Sharpe averaged over the model's tasks.",
            "", c["summary"].markdown(), ""]
    if c.get("settings"):
        out += ["## Settings side by side", "", SETTINGS_EXPLAIN, "", c["settings"].markdown(), ""]
    if c["rank_plot"]:
        out += [f"![rank versus alpha](plots/{c['rank_plot']})", ""]
    for s in c["sections"]:
        out += [f"## {s['task']} ({s['metric']})", "", s["table"].markdown(), ""]
        out += [f"> note: {n}" for n in s["notes"]]
        if s["items_table"] is not None:
            out += ["", ITEMS_EXPLAIN, "", s["items_table"].markdown(), ""]
        out += ["", f"![{s['task']} heatmap](plots/{s['heatmap']})", ""]
        if s["ci"]:
            out += [f"Bootstrap (k={c['k']}, seed {c['seed']}): mean ± 95% CI half-width of the mean (EuroEval: 1.96 × std / √k) and, in parentheses, the 2.5th–97.5th percentiles of the bootstrap scores (the spread a different test set of the same size could give).", "",
                    s["ci"].markdown(), ""]
        out += [f"Rank score basis: {s['rank_basis']}.", ""]
    return "\n".join(out)


def _html(c: dict, images: dict[str, bytes]) -> str:
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    b64 = {name: base64.b64encode(png).decode("ascii") for name, png in images.items()}
    return env.from_string(HTML_TEMPLATE).render(c=c, img=b64, explain=EXPLAIN, settings_explain=SETTINGS_EXPLAIN,
                                                 items_explain=ITEMS_EXPLAIN)


HTML_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Evalita-LLM report</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto; max-width: 1300px;
       padding: 0 1.5rem; color: #1d2327; line-height: 1.45; }
h1 { font-size: 1.8rem; margin-bottom: .3rem; } h2 { margin-top: 2.4rem; border-bottom: 2px solid #dde3e8; padding-bottom: .2rem; }
p.explain { color: #444; font-size: .92rem; max-width: 70rem; }
table { border-collapse: collapse; margin: .8rem 0 1rem; font-size: .9rem; }
th, td { border: 1px solid #d0d7de; padding: .3rem .6rem; }
th { background: #f3f5f7; text-align: center; }
td { text-align: right; font-variant-numeric: tabular-nums; }
td.text { text-align: left; }
td:first-child { text-align: left; font-weight: 600; white-space: nowrap; }
tr.summary td { background: #f7f9fb; }
tr.first-summary td { border-top: 2px solid #8c959f; }
.note { background: #fff8e1; border-left: 4px solid #f0b400; padding: .35rem .7rem; margin: .4rem 0; font-size: .9rem; }
img { max-width: 100%; display: block; margin: .6rem 0 1rem; }
.small { color: #555; font-size: .85rem; }
.scroll { overflow-x: auto; }
</style></head><body>
<h1>Evalita-LLM report</h1>
<p class="explain">{{ explain }}</p>
{% for n in c.notes %}<div class="note">{{ n }}</div>{% endfor %}
<h2>Models</h2>
<div class="scroll">{{ table(c.runs) }}</div>
{% if c.settings %}<h2>Settings side by side</h2><p>{{ settings_explain }}</p><div class="scroll">{{ table(c.settings) }}</div>{% endif %}
<h2>Summary</h2>
<p class="small">Per-task CPS of each task's headline metric; AvgP, MaxP, CPS and Sharpe averaged over the model's tasks.</p>
<div class="scroll">{{ table(c.summary) }}</div>
{% if c.rank_plot %}<img alt="rank versus alpha" src="data:image/png;base64,{{ img[c.rank_plot] }}">
<p class="small">Ranks by the mean Sharpe score over the tasks every model has ({{ c.common_tasks | join(', ') }}).</p>{% endif %}
{% for s in c.sections %}
<h2>{{ s.task }} <span class="small">({{ s.metric }})</span></h2>
{% for n in s.notes %}<div class="note">{{ n }}</div>{% endfor %}
<div class="scroll">{{ table(s.table) }}</div>
{% if s.items_table %}<p class="small">{{ items_explain }}</p><div class="scroll">{{ table(s.items_table) }}</div>{% endif %}
<img alt="{{ s.task }} heatmap" src="data:image/png;base64,{{ img[s.heatmap] }}">
{% if s.ci %}<p class="small">Bootstrap (k={{ c.k }}, seed {{ c.seed }}): mean ± 95% CI half-width of the mean (EuroEval: 1.96 × std / √k) and, in parentheses, the 2.5th–97.5th percentiles of the bootstrap scores (the spread a different test set of the same size could give).</p>
<div class="scroll">{{ table(s.ci) }}</div>{% endif %}
<p class="small">Rank score basis: {{ s.rank_basis }}.</p>
{% endfor %}
</body></html>
"""

TABLE_MACRO = """{% macro table(t) -%}
<table><thead><tr>{% for h in t.headers %}<th>{{ h }}</th>{% endfor %}</tr></thead><tbody>
{% for row in t.rows %}<tr{% if t.summary_from is not none and loop.index0 >= t.summary_from %} class="summary{% if loop.index0 == t.summary_from %} first-summary{% endif %}"{% endif %}>{% for cell in row %}<td{% if loop.index0 < t.text_cols %} class="text"{% endif %}>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</tbody></table>
{%- endmacro %}"""
HTML_TEMPLATE = TABLE_MACRO + HTML_TEMPLATE

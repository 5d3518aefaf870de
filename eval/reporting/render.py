"""The report's summary tables (per-task CPS and averages per model, rank scores, CIs, the runs and their notes) and
the report as Markdown and as self-contained HTML (Jinja2)."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..record.model import RunRecord
from . import stats
from .facts import NOT_COMPARABLE, run_rows
from .worth import MIN_ITEMS, NOT_A_MEASUREMENT
from .tables import PERCENT, TextTable, fmt, md_text, paper_table, transposed
from .unparsed_flag import none_read_prompts, none_read_summary
from .task_report import TaskReport


@dataclass
class Summary:
    models: list[str]
    rank_scores: dict[str, float]
    common_tasks: list[str]
    ranks_by_alpha: np.ndarray  # [alpha, model], over common_tasks


def summarize(reports: Sequence[TaskReport], models: list[str]) -> Summary:
    # a rank needs another model on the same task: alone, every run would be "best"
    rank_input = {rep.table.task: rep.avg_scores or {m: rep.table.model_scores(m) for m in rep.table.models}
                  for rep in reports if len(rep.table.models) > 1}
    direction = {rep.table.task: rep.higher_is_better for rep in reports}  # as recorded or declared, not assumed
    rank_scores = stats.mean_rank_scores(rank_input, higher_is_better=direction)
    common = [rep for rep in reports if set(rep.table.models) == set(models)]
    sign = {rep.table.task: 1.0 if direction[rep.table.task] else -1.0 for rep in common}

    def mean_sharpe(model: str, alpha: float) -> float:  # over the tasks every model has, in the metrics' direction
        return np.mean([sign[rep.table.task] * stats.sharpe_score(rep.table.model_scores(model), alpha, PERCENT)
                        for rep in common])

    ranks = (np.array([stats.rank_descending([mean_sharpe(m, a) for m in models]) for a in stats.ALPHAS]) if common
             else np.zeros((len(stats.ALPHAS), 0)))
    return Summary(models, rank_scores, [r.table.task for r in common], ranks)


def summary_table(reports: Sequence[TaskReport], summary: Summary, alpha: float) -> TextTable:
    # One column per task: a row is one model in one setting ("m [ce]"), so the reports of a task's settings share its
    # column (each row finds its own), and two settings of twelve models stay within 1,280 px (issue 47).
    by_task: dict[str, list[TaskReport]] = {}
    for rep in reports:
        by_task.setdefault(rep.table.task.split(" [")[0], []).append(rep)
    # a task: its CPS
    headers = ["model"] + list(by_task) + ["AvgP", "MaxP", "CPS", f"Sharpe α={alpha:g}", "rank score"]
    rows = []
    for m in summary.models:
        per_task, found = [], []  # found: (AvgP, MaxP, CPS, Sharpe) of each task the model has
        for same_task in by_task.values():
            t = next((rep.table for rep in same_task if m in rep.table.models), None)
            if t is None:
                per_task.append("–")
                continue
            st, j = t.stats(alpha), t.models.index(m)
            per_task.append(fmt(st.per_model[j].cps, PERCENT))
            found.append((st.per_model[j].avg, st.per_model[j].max, st.per_model[j].cps, st.sharpe[j]))
        means = [fmt(float(np.mean(v)), PERCENT) for v in zip(*found)] if found else ["–"] * 4
        rank = summary.rank_scores.get(m)
        rows.append([m] + per_task + means + [f"{rank:.2f}" if rank is not None else "–"])
    return TextTable(headers, rows)


def interval_cell(b: stats.BootstrapResult) -> str:
    """'point [2.5th–97.5th percentile of the resampled scores]': the score itself and the spread of the resamples."""
    return f"{fmt(b.point, PERCENT)} [{fmt(b.pct_low, PERCENT)}–{fmt(b.pct_high, PERCENT)}]"


def euroeval_cell(b: stats.BootstrapResult) -> str:
    """'bootstrap mean ± 1.96·SE of that mean' (EuroEval's convention; it shrinks as the resamples grow)."""
    return f"{fmt(b.mean, PERCENT)} ± {fmt(b.ci_high - b.mean, PERCENT)}"


def model_items(rep: TaskReport) -> dict[str, str]:
    """Per model, the items its scores of the task rest on (the items table's n column: '40' or '30–40')."""
    return {row[0]: row[1] for row in rep.items.rows} if rep.items is not None else {}


def measurement_notes(rep: TaskReport) -> list[str]:
    """'not a measurement' for each model whose scores of the task rest on fewer than MIN_ITEMS items."""
    return [f"{m}: n={n}, {NOT_A_MEASUREMENT}" for m, n in model_items(rep).items()
            if (fewest := n.split("–")[0]).isdigit() and int(fewest) < MIN_ITEMS]


def bootstrap_table(rep: TaskReport, cell: Callable[[stats.BootstrapResult], str]) -> TextTable:
    """Per prompt and AvgP, each model's bootstrap as ``cell`` states it (interval_cell, euroeval_cell)."""
    t = rep.table
    items = model_items(rep)
    rows = [[p] + [t.cell(p, m, cell(rep.cells[(m, p)])) for m in t.models] for p in t.prompts]
    avg = {m: stats.summarize_bootstrap(rep.avg_scores[m],
                                        point=float(np.mean([rep.cells[(m, p)].point for p in t.prompts])))
           for m in t.models}
    rows.append(["AvgP"] + [cell(avg[m]) for m in t.models])
    headers = ["prompt"] + [f"{m} (n={items[m]})" if m in items else m for m in t.models]
    return TextTable(headers, rows, summary_from=len(t.prompts))


def runs_table(runs: Sequence[RunRecord]) -> TextTable:
    """One row per run: the model and everything that changes its numbers (facts.run_rows)."""
    rows, headers = [], []
    for r in runs:
        facts = run_rows(r)
        headers = [name for name, _ in facts]
        rows.append([r.display, r.model.name_or_path, r.model.dtype or "", r.config.device or ""]
                    + [value for _, value in facts] + [str(r.path)])
    headers = ["model", "name_or_path", "dtype", "device"] + headers + ["results file"]
    return TextTable(headers, rows, text_cols=len(headers))


def run_notes(runs: Sequence[RunRecord]) -> list[str]:
    """Report-wide warnings: unfinished runs, non-official splits, the Summary's averages over prompts with no answer
    read."""
    notes = [f"{r.display}: {r.status_text} (report --partial): its other tasks are missing" for r in runs if r.partial]
    notes += [f"{r.display}: the Summary's averages include {text}"
              for r in runs if (text := none_read_summary(none_read_prompts(r.results)))]
    notes += [f"{r.display}: {NOT_COMPARABLE}: {'; '.join(r.not_comparable_reasons)}"
              for r in runs if r.not_comparable_reasons]
    # what the reader found (a hand-edited comparability flag)
    notes += [f"{r.display}: {note}" for r in runs for note in r.notes]
    return notes


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def render_context(runs, reports, summary, alpha, k, seed, notes) -> dict:
    sections = [{"task": rep.table.task, "metric": rep.metric, "table": paper_table(rep.table, alpha),
                 "ci": bootstrap_table(rep, interval_cell) if rep.cells else None,
                 "euroeval": bootstrap_table(rep, euroeval_cell) if rep.cells else None,
                 "notes": rep.table.notes + measurement_notes(rep), "items_table": rep.items,
                 "heatmap": f"heatmap_{slug(rep.table.task)}.png",
                 # a rank needs another model on the task
                 "rank_basis": rep.rank_basis if len(rep.table.models) > 1 else None} for rep in reports]
    runs_rows = runs_table(runs)
    return {"runs": transposed(runs_rows),
            "run_facts": [(row[0], list(zip(runs_rows.headers[1:], row[1:]))) for row in runs_rows.rows],
            "summary": summary_table(reports, summary, alpha), "sections": sections,
            "alpha": alpha, "k": k, "seed": seed, "notes": notes, "common_tasks": summary.common_tasks,
            "rank_plot": "rank_vs_alpha.png" if len(runs) > 1 and summary.common_tasks else None}


EXPLAIN = ("Scores in percent. Per prompt (rows) across models and per model (columns) across prompts: MinP, MaxP, "
           "AvgP; Sat = 1 - (MaxP - AvgP) / 100; CPS = Sat × MaxP (Combined Performance Score). Sharpe = mean / (α × "
           "std / 100 + 1), population std over prompts. Rank score (EuroEval): per task, 1 for the best model, each "
           "next model adds |Δmean| / std of the models' means when a one-sided Welch t-test (p < 0.05) finds it "
           "worse; averaged over the tasks the model shares with another run (lower is better; – when it shares none).")
ITEMS_EXPLAIN = ("Items evaluated per prompt (n) and the limit; baselines of the headline metric on the same gold "
                 "labels, in percent: chance (uniform random choice) and majority (always the most frequent gold "
                 "class); generated answers that no rule could parse (counted wrong) as k / n per prompt, and how many "
                 "each answer rule read (docs/settings.md).")
SETTINGS_EXPLAIN = ("Per model and task, each evaluation setting (docs/settings.md) with the multi-prompt statistics "
                    "of the task's headline metric: AvgP [MinP–MaxP] CPS, and the answers no rule could parse (counted "
                    "wrong).")


def interval_explain(k: int, seed: int) -> str:
    return (f"Score and 95% percentile interval (bootstrap, k={k}, seed {seed}): the score on the evaluated items (n "
            "per model in the header) and, in brackets, the 2.5th–97.5th percentiles of the scores of k resamples of "
            "those items: the spread a different test set of the same size could give. AvgP: the mean over the "
            "prompts, resampled with the same items for every prompt.")


EUROEVAL_EXPLAIN = ("EuroEval's interval, for comparison with EuroEval only: the mean of the same k bootstrap scores ± "
                    "1.96 × their std / √k (the standard error of that mean). It shrinks as k grows: it says how well "
                    "k resamples pin down their mean, not how far the score could move.")


def to_markdown(c: dict) -> str:
    out = ["# Evalita-LLM report", "", EXPLAIN, ""]
    out += [f"> note: {md_text(n)}" for n in c["notes"]]
    out += ["", "## Models", "", c["runs"].markdown(), "", "## Summary", "",
            "Per-task CPS of each task's headline metric; AvgP, MaxP, CPS and Sharpe averaged over the model's tasks.",
            "", c["summary"].markdown(), ""]
    if c.get("settings"):
        out += ["## Settings side by side", "", SETTINGS_EXPLAIN, "", c["settings"].markdown(), ""]
    if c["rank_plot"]:
        out += [f"![rank versus alpha](plots/{c['rank_plot']})", ""]
    for s in c["sections"]:
        out += [f"## {md_text(s['task'])} ({md_text(s['metric'])})", "", s["table"].markdown(), ""]
        out += [f"> note: {md_text(n)}" for n in s["notes"]]
        if s["items_table"] is not None:
            out += ["", ITEMS_EXPLAIN, "", s["items_table"].markdown(), ""]
        out += ["", f"![{md_text(s['task'])} heatmap](plots/{s['heatmap']})", ""]
        if s["ci"]:
            out += [interval_explain(c["k"], c["seed"]), "", s["ci"].markdown(), "", EUROEVAL_EXPLAIN, "",
                    s["euroeval"].markdown(), ""]
        out += [f"Rank score basis: {md_text(s['rank_basis'])}.", ""] if s["rank_basis"] else []
    return "\n".join(out)


def to_html(c: dict, images: dict[str, bytes]) -> str:
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    b64 = {name: base64.b64encode(png).decode("ascii") for name, png in images.items()}
    return env.from_string(HTML_TEMPLATE).render(c=c, img=b64, explain=EXPLAIN, settings_explain=SETTINGS_EXPLAIN,
                                                 items_explain=ITEMS_EXPLAIN, interval_explain=interval_explain,
                                                 euroeval_explain=EUROEVAL_EXPLAIN)


HTML_TEMPLATE = """{% macro table(t) -%}
<table><thead><tr>{% for h in t.headers %}<th>{{ h }}</th>{% endfor %}</tr></thead><tbody>
{% for row in t.rows %}<tr{% if t.summary_from is not none and loop.index0 >= t.summary_from %} class="summary
{%- if loop.index0 == t.summary_from %} first-summary{% endif %}"{% endif %}>
{%- for cell in row %}<td{% if loop.index0 < t.text_cols %} class="text"{% endif %}>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</tbody></table>
{%- endmacro %}<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Evalita-LLM report</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto; max-width: 1300px;
       padding: 0 1.5rem; color: #1d2327; line-height: 1.45; }
h1 { font-size: 1.8rem; margin-bottom: .3rem; }
{#- #} h2 { margin-top: 2.4rem; border-bottom: 2px solid #dde3e8; padding-bottom: .2rem; }
p.explain { color: #444; font-size: .92rem; max-width: 70rem; }
table { border-collapse: collapse; margin: .8rem 0 1rem; font-size: .9rem; }
th, td { border: 1px solid #d0d7de; padding: .3rem .6rem; }
th { background: #f3f5f7; text-align: center; }
td { text-align: right; font-variant-numeric: tabular-nums; }
td.text { text-align: left; }
/* A row's name wraps (at a space, or after a '-') only where its table would not fit: "model [setting]" rows
{#- #} (issue 47). */
td:first-child { text-align: left; font-weight: 600; }
tr.summary td { background: #f7f9fb; }
tr.first-summary td { border-top: 2px solid #8c959f; }
.note { background: #fff8e1; border-left: 4px solid #f0b400; padding: .35rem .7rem; margin: .4rem 0; font-size: .9rem; }
img { max-width: 100%; display: block; margin: .6rem 0 1rem; }
.small { color: #555; font-size: .85rem; }
.scroll { overflow-x: auto; }
/* The run details: one definition list per model (not a 17-column table that breaks words at 1,400 px). */
.models { display: grid; grid-template-columns: repeat(auto-fill, minmax(26rem, 1fr)); gap: .8rem; }
dl.facts { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .1rem .9rem; margin: 0;
{#- #} padding: .5rem .8rem;
           border: 1px solid #d0d7de; border-radius: 4px; font-size: .85rem; overflow-x: auto; }
dl.facts h3 { grid-column: 1 / -1; margin: 0 0 .3rem; font-size: 1rem; }
dl.facts dt { color: #555; white-space: nowrap; } dl.facts dd { margin: 0; overflow-wrap: normal; word-break: normal; }
</style></head><body>
<h1>Evalita-LLM report</h1>
<p class="explain">{{ explain }}</p>
{% for n in c.notes %}<div class="note">{{ n }}</div>{% endfor %}
<h2>Models</h2>
<div class="models">{% for model, facts in c.run_facts %}<dl class="facts"><h3>{{ model }}</h3>
{% for name, value in facts %}<dt>{{ name }}</dt><dd>{{ value }}</dd>{% endfor %}</dl>
{% endfor %}</div>
{% if c.settings %}<h2>Settings side by side</h2><p>{{ settings_explain }}</p>
{#- #}<div class="scroll">{{ table(c.settings) }}</div>{% endif %}
<h2>Summary</h2>
<p class="small">Per-task CPS of each task's headline metric; AvgP, MaxP, CPS and Sharpe averaged over the model's
{#- #} tasks.</p>
<div class="scroll">{{ table(c.summary) }}</div>
{% if c.rank_plot %}<img alt="rank versus alpha" src="data:image/png;base64,{{ img[c.rank_plot] }}">
<p class="small">Ranks by the mean Sharpe score over the tasks every model has ({{ c.common_tasks | join(', ') }}).</p>
{%- endif %}
{% for s in c.sections %}
<h2>{{ s.task }} <span class="small">({{ s.metric }})</span></h2>
{% for n in s.notes %}<div class="note">{{ n }}</div>{% endfor %}
<div class="scroll">{{ table(s.table) }}</div>
{% if s.items_table %}<p class="small">{{ items_explain }}</p>
{#- #}<div class="scroll">{{ table(s.items_table) }}</div>{% endif %}
<img alt="{{ s.task }} heatmap" src="data:image/png;base64,{{ img[s.heatmap] }}">
{% if s.ci %}<p class="small">{{ interval_explain(c.k, c.seed) }}</p>
<div class="scroll">{{ table(s.ci) }}</div>
<p class="small">{{ euroeval_explain }}</p>
<div class="scroll">{{ table(s.euroeval) }}</div>{% endif %}
{% if s.rank_basis %}<p class="small">Rank score basis: {{ s.rank_basis }}.</p>{% endif %}
{% endfor %}
</body></html>
"""

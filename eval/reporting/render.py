"""The report as Markdown and as self-contained HTML (Jinja2), from the tables the other modules computed."""

from __future__ import annotations

import base64
import re

from .summary import bootstrap_table, euroeval_cell, interval_cell, measurement_notes, runs_table, summary_table
from .tables import md_text, paper_table, transposed


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

"""The report's summary tables: per-task CPS and averages per model, rank scores, CIs, the runs and their notes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..metrics import higher_is_better
from . import stats
from .facts import NOT_COMPARABLE, run_rows
from .runs import PERCENT, RunResults
from .tables import TextTable, fmt
from .task_report import TaskReport


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
    direction = {rep.table.task: higher_is_better(rep.table.task, rep.metric) for rep in reports}  # declared, not assumed
    rank_scores = stats.mean_rank_scores(rank_input, higher_is_better=direction)
    common = [rep for rep in reports if set(rep.table.models) == set(models)]
    if common:
        sign = {rep.table.task: 1.0 if direction[rep.table.task] else -1.0 for rep in common}
        ranks = np.array([
            stats.rank_descending([np.mean([sign[rep.table.task] * stats.sharpe_score(rep.table.model_scores(m), a, PERCENT) for rep in common])
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

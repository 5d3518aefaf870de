"""The report's summary tables: per-task CPS and averages per model, rank scores, CIs, the runs and their notes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..record.model import RunRecord
from . import stats
from .facts import NOT_COMPARABLE, run_rows
from .worth import MIN_ITEMS, NOT_A_MEASUREMENT
from .tables import PERCENT, TextTable, fmt
from .unparsed_flag import none_read_prompts, none_read_summary
from .task_report import TaskReport


@dataclass
class Summary:
    models: list[str]
    tasks: list[str]
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
    return Summary(models, [r.table.task for r in reports], rank_scores, [r.table.task for r in common], ranks)


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
        per_task, avg, mx, cps, sharpe = [], [], [], [], []
        for same_task in by_task.values():
            t = next((rep.table for rep in same_task if m in rep.table.models), None)
            if t is None:
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

"""The report's view of evaluation settings: runs of one model in several settings side by side (docs/settings.md,
"Report"). Runs of different setting labels have different prompts, so the report keeps one table per (task, label).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..record.model import ConfigRecord
from . import stats
from .tables import PERCENT, TextTable
from .task_report import headline_metric


def setting_label(config: ConfigRecord) -> str:
    label = config.setting or "loglikelihood"  # absent: a results.json written before settings existed
    label = f"{label} constrained" if config.constrained else label
    return f"{label} thinking" if config.thinking else label  # --thinking on: another entry, as another setting


def labels_of(runs: Sequence[Any]) -> list[str]:
    return list(dict.fromkeys(setting_label(r.config) for r in runs))


def base_name(run: Any) -> str:
    """The model's display name without the setting suffix the report adds."""
    return run.display.rsplit(" [", 1)[0]


def settings_table(runs: Sequence[Any], tasks: Sequence[str]) -> TextTable | None:
    """Rows (model, task), columns per setting label: 'AvgP [MinP–MaxP] CPS (unparsed k / n)', n over the prompts;
    None for a single label."""
    labels = labels_of(runs)
    if len(labels) < 2:
        return None
    rows = []
    models = list(dict.fromkeys(base_name(r) for r in runs))
    for model in models:
        for task in tasks:
            cells, found = [], False
            for label in labels:
                run = next((r for r in runs if base_name(r) == model and setting_label(r.config) == label
                            and task in r.results), None)
                if run is None:
                    cells.append("–")
                    continue
                found = True
                prompts = run.results[task]
                names = [m for p in prompts.values() for m in p if m not in ("n", "unparsed")]
                metric, _ = headline_metric(task, names, [run])
                s = stats.spread_stats([float(p[metric]) * PERCENT for p in prompts.values()], PERCENT)
                unparsed = sum(p["unparsed"] for p in prompts.values() if "unparsed" in p)
                answers = sum(p["n"] for p in prompts.values())
                cell = f"{s.avg:.1f} [{s.min:.1f}–{s.max:.1f}] CPS {s.cps:.1f}"
                cells.append(cell + (f" (unparsed {unparsed} / {answers})"
                                     if "unparsed" in next(iter(prompts.values())) else ""))
            if found:
                rows.append([model, task] + cells)
    return TextTable(["model", "task"] + labels, rows, text_cols=2)

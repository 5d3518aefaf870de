"""``evalita-eval aggregate``: paper-style multi-prompt tables from a scores file of any harness."""

from __future__ import annotations

import json
from pathlib import Path

from .tables import ScaleName, TaskTable, build_tables, paper_table, read_scores, resolve_scale, table_json


def aggregate_markdown(tables: list[TaskTable], alpha: float = 1.0, source: str = "") -> str:
    scale = tables[0].scale
    unit = "percent" if scale == 100.0 else "fractions in [0, 1]"
    parts = [f"# Multi-prompt scores{f' of {source}' if source else ''}", "",
             f"Scores in {unit}. Sat = 1 - (MaxP - AvgP){' / 100' if scale == 100.0 else ''}; CPS = Sat * MaxP; "
             f"Sharpe = mean / (α * std{' / 100' if scale == 100.0 else ''} + 1), population std over prompts.", ""]
    for t in tables:
        parts += [f"## {t.task}", "", paper_table(t, alpha).markdown(), ""]
    return "\n".join(parts)


def run_aggregate(path: Path, out: Path | None, scale: ScaleName = "auto", alpha: float = 1.0) -> str:
    """The tables of ``path`` as Markdown; also aggregate.md and aggregate.json in ``out`` when given."""
    rows = read_scores(path)
    if not rows:
        raise ValueError(f"{path}: no score rows")
    tables = build_tables(rows, resolve_scale(rows, scale))
    text = aggregate_markdown(tables, alpha, path.name)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "aggregate.md").write_text(text, encoding="utf-8")
        payload = {"source": str(path), "scale": tables[0].scale, "alpha": alpha,
                   "tasks": {t.task: table_json(t, alpha) for t in tables}}
        (out / "aggregate.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return text

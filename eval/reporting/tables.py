"""Score tables: (model, task, prompt, score) rows -> the paper's per-task tables, for ``report`` (rows of results.json
files) and ``evalita-eval aggregate`` (rows of a scores file of any harness), which is here too."""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Iterable, Literal, Sequence

import numpy as np

from ..record import RecordError
from .stats import TableStats, table_stats

ScaleName = Literal["auto", "percent", "fraction"]
SCORE_COLUMNS = ("model", "task", "prompt", "score")
PERCENT = 100.0  # report tables are in percent, as the paper's


@dataclass(frozen=True)
class ScoreRow:
    model: str
    task: str
    prompt: str
    score: float
    where: str = ""  # "file:line" or "file[index]", for error messages


def natural_key(text: str) -> list:
    """p2 before p10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _read_csv_scores(path: Path) -> list[ScoreRow]:
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in SCORE_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise RecordError(f"{path}:1: header {reader.fieldnames} lacks column(s) {missing}; expected a header with "
                              f"{', '.join(SCORE_COLUMNS)}")
        return [_make_row(rec, f"{path}:{reader.line_num}") for rec in reader]


def _read_json_scores(path: Path) -> list[ScoreRow]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise RecordError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    if isinstance(data, dict) and "rows" in data:
        data = data["rows"]
    if not isinstance(data, list):
        raise RecordError(f"{path}: expected a JSON list of {{model, task, prompt, score}} objects (or "
                          f"{{\"rows\": [...]}})")
    rows = []
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise RecordError(f"{path}[{i}]: expected an object with keys {', '.join(SCORE_COLUMNS)}, got {rec!r}")
        missing = [c for c in SCORE_COLUMNS if c not in rec]
        if missing:
            raise RecordError(f"{path}[{i}]: missing key(s) {missing}")
        rows.append(_make_row(rec, f"{path}[{i}]"))
    return rows


def _make_row(rec: dict, where: str) -> ScoreRow:
    names = {c: str(rec[c]).strip() for c in ("model", "task", "prompt")}
    for col, value in names.items():
        if not value:
            raise RecordError(f"{where}: empty {col}")
    try:
        score = float(rec["score"])
    except (TypeError, ValueError):
        raise RecordError(f"{where}: score {rec['score']!r} is not a number") from None
    if not math.isfinite(score):
        raise RecordError(f"{where}: score {rec['score']!r} is not finite")
    return ScoreRow(names["model"], names["task"], names["prompt"], score, where)


def resolve_scale(rows: Sequence[ScoreRow], scale: ScaleName = "auto") -> float:
    """100 for percentages, 1 for fractions ('auto': percent if any score is above 1); every score in [0, scale]."""
    value = {"auto": 100.0 if any(r.score > 1.0 for r in rows) else 1.0, "percent": 100.0, "fraction": 1.0}.get(scale)
    if value is None:
        raise ValueError(f"unknown scale {scale!r}; expected auto, percent or fraction")
    for r in rows:
        if not 0.0 <= r.score <= value:
            unit = "percent" if value == 100.0 else "fraction"
            raise RecordError(f"{r.where}: score {r.score} is outside [0, {value:g}] ({unit} scale)")
    return value


@dataclass
class TaskTable:
    """One task: scores[i, j] = prompt i, model j (the paper's layout)."""

    task: str
    prompts: list[str]
    models: list[str]
    scores: np.ndarray
    scale: float
    notes: list[str] = field(default_factory=list)
    # (prompt, model) -> what is said beside its score: "no answer read (2/2 unparsed)" (issue 40)
    marks: dict[tuple[str, str], str] = field(default_factory=dict)

    def cell(self, prompt: str, model: str, text: str) -> str:
        """A score's text with the mark of its (prompt, model), if any."""
        mark = self.marks.get((prompt, model))
        return f"{text} {mark}" if mark else text

    def stats(self, alpha: float = 1.0) -> TableStats:
        return table_stats(self.scores, self.scale, alpha)

    def model_scores(self, model: str) -> np.ndarray:
        return self.scores[:, self.models.index(model)]


def build_tables(rows: Iterable[ScoreRow], scale: float) -> list[TaskTable]:
    """Group rows by task; models in order of first appearance, prompts in natural order.

    Every model of a task must have a score for every prompt of that task."""
    cells: dict[str, dict[tuple[str, str], ScoreRow]] = {}
    for r in rows:
        task_cells = cells.setdefault(r.task, {})
        if (r.prompt, r.model) in task_cells:
            first = task_cells[(r.prompt, r.model)]
            raise RecordError(f"{r.where}: second score for model {r.model!r}, task {r.task!r}, prompt {r.prompt!r} "
                              f"(first at {first.where})")
        task_cells[(r.prompt, r.model)] = r
    tables = []
    for task, task_cells in cells.items():
        models = list(dict.fromkeys(m for _, m in task_cells))
        prompts = sorted({p for p, _ in task_cells}, key=natural_key)
        missing = [f"{m}/{p}" for p in prompts for m in models if (p, m) not in task_cells]
        if missing:
            raise RecordError(f"task {task!r}: no score for model/prompt {', '.join(missing)}; every model needs a "
                              "score for every prompt of the task")
        scores = np.array([[task_cells[(p, m)].score for m in models] for p in prompts])
        tables.append(TaskTable(task, prompts, models, scores, scale))
    return tables


# ---------------------------------------------------------------- rendering


class Markdown(str):
    """Text that is Markdown already (our own markup around safe parts: a link to a run folder), written as it is."""


_MARKUP = re.compile(r"[\\<|]")


def md_text(text: object) -> str:
    """``text`` (a name or any text read from a record or given by a user) as literal Markdown text, the one escape
    of every Markdown we write: on one line (no heading, list or table row of its own), no raw HTML or autolink
    (``<``), no link or image (``](``), no cell break (``|``); CommonMark backslash escapes: it renders as it reads."""
    line = " ".join(str(text).splitlines())
    return _MARKUP.sub(lambda m: "\\" + m.group(), line).replace("](", "]\\(")


@dataclass
class TextTable:
    """A rendered table: the same cells go to Markdown and to HTML."""

    headers: list[str]
    rows: list[list[str]]
    # Rows from this index on are summary rows (drawn apart in HTML).
    summary_from: int | None = None
    # Leading columns of text (left-aligned); the rest are numbers (right-aligned).
    text_cols: int = 1

    def markdown(self) -> str:
        def line(cells: Sequence[str]) -> str:
            return "| " + " | ".join(c if isinstance(c, Markdown) else md_text(c) for c in cells) + " |"

        align = ["---"] * self.text_cols + ["---:"] * (len(self.headers) - self.text_cols)
        return "\n".join([line(self.headers), line(align)] + [line(r) for r in self.rows])


def fmt(value: float, scale: float) -> str:
    """Round half up, as the paper's tables (spreadsheets) do: 71.925 -> 71.93. Rounding to 9 decimals
    first removes binary noise (71.925 is 71.92499999... as a float)."""
    if value is None or math.isnan(value):
        return ""
    exact = Decimal(repr(round(float(value), 9)))
    digits = 2 if scale == 100.0 else 4  # two decimals in percent (as the paper prints), four in fractions
    return str(exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def transposed(table: TextTable) -> TextTable:
    """One column per row of ``table`` (named by its first cell), one row per other column: a table of many
    columns and few rows (the run details) read down instead of across."""
    rows = [[header] + [row[i] for row in table.rows] for i, header in enumerate(table.headers) if i > 0]
    return TextTable([table.headers[0]] + [row[0] for row in table.rows], rows, text_cols=len(table.rows) + 1)


def paper_table(table: TaskTable, alpha: float = 1.0) -> TextTable:
    """Prompts as rows and models as columns, MinP/MaxP/AvgP/CPS per prompt on the right (left out with one
    model: each would repeat its score), MinP/MaxP/AvgP/CPS and the Sharpe score per model at the bottom."""
    st, s = table.stats(alpha), table.scale
    view_cols = ["MinP", "MaxP", "AvgP", "CPS"] if len(table.models) > 1 else []
    rows = []
    for i, prompt in enumerate(table.prompts):
        pp = st.per_prompt[i].as_dict()
        rows.append([prompt] + [table.cell(prompt, m, fmt(v, s)) for m, v in zip(table.models, table.scores[i])]
                    + [fmt(pp[c], s) for c in view_cols])
    blank = [""] * len(view_cols)
    for c in ["MinP", "MaxP", "AvgP", "CPS"]:
        rows.append([c] + [fmt(pm.as_dict()[c], s) for pm in st.per_model] + blank)
    rows.append([f"Sharpe (α={alpha:g})"] + [fmt(v, s) for v in st.sharpe] + blank)
    return TextTable(["prompt"] + table.models + view_cols, rows, summary_from=len(table.prompts))


def table_json(table: TaskTable, alpha: float = 1.0) -> dict:
    st = table.stats(alpha)
    return {"models": table.models, "prompts": table.prompts, "scores": table.scores.tolist(),
            "per_prompt": {p: st.per_prompt[i].as_dict() for i, p in enumerate(table.prompts)},
            "per_model": {m: st.per_model[j].as_dict() for j, m in enumerate(table.models)},
            "sharpe": {m: st.sharpe[j] for j, m in enumerate(table.models)}, "notes": table.notes}


# ---------------------------------------------------------------- `evalita-eval aggregate`


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
    rows = _read_json_scores(path) if path.suffix.lower() == ".json" else _read_csv_scores(path)  # docs/statistics.md
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

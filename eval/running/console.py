"""What ``run`` prints when it is done: the scores per prompt and per task (their n, the chance and majority
baselines) and what was computed; a score on fewer than ``worth.MIN_ITEMS`` items says it is not a measurement."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..settings.instruct import UNPARSED
from ..reporting.unparsed_flag import flag_legend, flag_mark, none_read, none_read_summary
from ..reporting.worth import MIN_ITEMS, NOT_A_MEASUREMENT

Results = dict[str, dict[str, dict[str, float]]]


def columns(rows: Sequence[Sequence[str]], text: set[int]) -> str:
    """Rows as aligned columns: those in ``text`` left-aligned, the numbers right-aligned; no trailing blanks."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    cells = (((c.ljust(w) if i in text else c.rjust(w)) for i, (c, w) in enumerate(zip(r, widths))) for r in rows)
    return "\n".join("  ".join(row).rstrip() for row in cells)


def summary_table(results: Results) -> str:
    """Task x prompt table of every metric (as percentages) and its n, for the console."""
    rows = [("task", "prompt", "n", "metrics")]
    for task, prompts in results.items():
        for prompt, scores in prompts.items():
            metrics = "  ".join(f"{m}={v}/{scores.get('n', '?')}" if m == UNPARSED else f"{m}={100 * v:.2f}"
                                for m, v in scores.items() if m != "n" and not (m == UNPARSED and none_read(scores)))
            rows.append((task, prompt, str(scores.get("n", "")), metrics + flag_mark(scores)))
    return columns(rows, text={0, 1, 3}) + flag_legend(results)


def _items(prompts: dict[str, dict[str, float]]) -> tuple[str, int | None]:
    """The items the task's prompts were scored on: '2' (or '2–3' where prompts differ), and the smallest count."""
    ns = sorted({int(s["n"]) for s in prompts.values() if isinstance(s.get("n"), (int, float))})
    if not ns:
        return "?", None
    return (str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"), ns[0]


def baseline_text(baselines: dict[str, Any] | None, kind: str, metric: str) -> str:
    """A baseline of the headline metric in percent, 'n/a' for a generative task, '–' where none was computed."""
    value = (baselines or {}).get(kind)
    if isinstance(value, str):
        return "n/a"
    score = value.get(metric) if isinstance(value, dict) else None
    return f"{100 * score:.2f}" if isinstance(score, (int, float)) and not isinstance(score, bool) else "–"


def task_summary_table(results: Results, baselines: dict[str, dict] | None = None) -> str:
    """Per task, the headline metric over its prompts: AvgP, MaxP and CPS in % (SPEC), its items n, the chance and
    majority baselines (reporting/baselines.py), and a note below ``MIN_ITEMS`` items."""
    from evalita_data.registry import task_of_entry

    from ..reporting.stats import spread_stats

    rows = [("task", "metric", "n", "prompts", "AvgP %", "MaxP %", "CPS %", "chance %", "majority %", "")]
    for name, prompts in results.items():
        spec = task_of_entry(name)
        if not prompts or spec is None:
            continue
        metric = spec.metrics[0].name  # the headline metric, as in the report
        values = [scores[metric] for scores in prompts.values() if metric in scores]
        if not values:
            continue
        s = spread_stats(values)
        n_text, n_min = _items(prompts)
        base = (baselines or {}).get(name)
        unread = [p for p, scores in prompts.items() if none_read(scores)]
        notes = [NOT_A_MEASUREMENT if n_min is None or n_min < MIN_ITEMS else "",
                 f"includes {none_read_summary(unread)}" if unread else ""]
        note = "; ".join(n for n in notes if n)
        rows.append((name, metric, n_text, str(len(values)), f"{100 * s.avg:.2f}", f"{100 * s.max:.2f}",
                     f"{100 * s.cps:.2f}", *(baseline_text(base, k, metric) for k in ("chance", "majority")), note))
    return columns(rows, text={0, 1, len(rows[0]) - 1})


def run_counts(result: Any, cache_path: Path, output_dir: str | Path) -> str:
    """What was computed and what was read back from the resume cache, exactly (``result``: a runner.RunResult)."""
    repeated = result.requests - result.computed - result.cached
    text = f"{result.computed} requests computed, {result.cached} read from the cache {cache_path}"
    if repeated:
        text += f", {repeated} repeated within the run (computed once)"
    text += f" ({result.requests} in all)"
    return text + f"; results in {Path(output_dir) / 'results.json'}"

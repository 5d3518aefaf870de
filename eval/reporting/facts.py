"""What a run was, for every table and card built from it (report, push-results card): docs/statistics.md, "What ran"
and "Items and answers"; its setting, and runs of one model in several settings side by side (docs/settings.md,
"Report": runs of different setting labels have different prompts, so the report keeps one table per (task, label))."""

from __future__ import annotations

from typing import Any, Sequence

from ..naming import is_local
from ..record import NOT_COMPARABLE, RunRecord, comparability_text
from ..record.model import ConfigRecord, ModelRecord, Timing, TraceSummary
from . import stats
from .tables import PERCENT, TextTable, fmt
from .task_report import headline_metric
from .unparsed_flag import MARK, finite_number, is_flagged


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
    for model in dict.fromkeys(base_name(r) for r in runs):
        for task in tasks:
            cells = []
            for label in labels:
                run = next((r for r in runs if base_name(r) == model and setting_label(r.config) == label
                            and task in r.results), None)
                if run is None:
                    cells.append("–")
                    continue
                prompts = run.results[task]
                names = [m for p in prompts.values() for m in p if m not in ("n", "unparsed")]
                metric, _ = headline_metric(task, names, [run])
                s = stats.spread_stats([float(p[metric]) * PERCENT for p in prompts.values()], PERCENT)
                unparsed = sum(p["unparsed"] for p in prompts.values() if "unparsed" in p)
                answers = sum(p["n"] for p in prompts.values())
                cell = f"{s.avg:.1f} [{s.min:.1f}–{s.max:.1f}] CPS {s.cps:.1f}"
                cells.append(cell + (f" (unparsed {unparsed} / {answers})"
                                     if "unparsed" in next(iter(prompts.values())) else ""))
            if any(c != "–" for c in cells):  # some setting has the task
                rows.append([model, task] + cells)
    return TextTable(["model", "task"] + labels, rows, text_cols=2)


def time_text(timing: dict[str, Timing]) -> str:
    """Minutes of wall and compute time and the requests from the cache, summed over the tasks."""
    def total(key: str) -> float | None:  # None where the file has no such field
        values = [value for entry in timing.values() if (value := getattr(entry, key)) is not None]
        return sum(values) if values else None

    wall, compute, requests = total("wall_s"), total("compute_s"), total("requests")
    if wall is None:
        return "–"
    text = f"{wall / 60:.1f} min wall"
    if compute is not None:
        text += f", {compute / 60:.1f} min compute"
    if requests:
        text += f", {int(total('cached') or 0)} of {int(requests)} requests from the cache"
    return text


def chat_text(config: ConfigRecord) -> str:
    if not config.apply_chat_template:
        return "no"
    ident = config.chat_template
    if ident is not None and ident.sha256:
        return f"yes, sha256 {ident.sha256[:12]}"
    if ident is not None and ident.source == "server":
        return "yes, the server's"
    return "yes"


def fewshot_text(config: ConfigRecord) -> str:
    k = config.num_fewshot or 0
    if not k:
        return "0"
    if not config.apply_chat_template:
        return f"{k}, in the prompt"
    return f"{k}, {'one user turn' if config.fewshot_as_multiturn is False else 'multi-turn'}"


def limit_text(config: ConfigRecord) -> str:
    return "all" if config.limit is None else str(config.limit)


def evaluated_n(results: dict) -> str:
    """Items per prompt over the run's tasks: one number or the range (``n``: a count, record/results.schema.json)."""
    ns = sorted({p["n"] for prompts in results.values() for p in prompts.values()})
    if not ns:
        return "–"
    return str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"


def revision_text(model: ModelRecord) -> str:
    if model.revision:
        return model.revision
    local = model.local_folder or is_local(model.name_or_path)  # local_folder: published form
    return "– (local folder)" if local else "– (the Hub's default branch at run time)"


def run_rows(run: RunRecord) -> list[tuple[str, str]]:
    """(what, value) pairs that every table or card of a run states; comparability as derived from its config
    when the record was read (record/build.py), never the file's own flag."""
    config = run.config
    return [
        ("setting", setting_label(config)),
        ("constrained", "yes" if config.constrained else "no"),
        ("system instruction", config.system_instruction or "none"),
        ("chat template", chat_text(config)),
        ("few-shot", fewshot_text(config)),
        ("split", "official" if not config.split else f"{config.split} ({NOT_COMPARABLE})"),
        ("comparable with the paper", comparability_text(run.not_comparable_reasons)),
        ("n per prompt", evaluated_n(run.results)),
        ("limit", limit_text(config)),
        ("revision", revision_text(run.model)),
        ("time", time_text(run.timing)),
        ("status", run.status_text),
    ]


def unparsed_cell(prompts: dict) -> str:
    """'p1 3 / 10, p2 0 / 10' (answers no rule read, per prompt), or '–' where the task has no count."""
    cells = [f"{p} {s['unparsed']} / {s['n']}" + (f" {MARK}" if is_flagged(s) else "")
             for p, s in prompts.items() if "unparsed" in s]
    return ", ".join(cells) if cells else "–"


def rules_cell(parsed_by: dict) -> str:
    """'p1: exact 7, start 1; p2: ...' from results.json parsed_by.<task>."""
    if not parsed_by:
        return "–"
    return "; ".join(f"{p}: " + ", ".join(f"{rule} {n}" for rule, n in counts.items())
                     for p, counts in parsed_by.items())


def trace_cell(traces: dict[str, TraceSummary] | None) -> str:
    """'p1: mean 412.5 tokens, forced 2, unfinished 1; p2: ...' from results.json reasoning.<task> (--thinking on;
    checked by the record's schema), '–' without."""
    if not traces:
        return "–"
    cells = []
    for prompt, t in traces.items():
        size = f"mean {t.mean_trace_tokens} tokens" if t.mean_trace_tokens is not None else "length not counted"
        cells.append(f"{prompt}: {size}, forced {t.forced}, unfinished {t.unfinished}")
    return "; ".join(cells)


def baseline_cell(baselines: dict | None, kind: str, metric: str) -> str:
    if not isinstance(baselines, dict):
        return "–"
    value = baselines.get(kind)
    if isinstance(value, str):
        return value  # "n/a (generative task)"
    score = finite_number((value or {}).get(metric)) if isinstance(value, dict) else None
    return "–" if score is None else fmt(score * PERCENT, PERCENT)


def class_label(run: RunRecord, task: str, cls: Any) -> str:
    """The answer of class ``cls`` as the prompts word it ("No" / "Falso"), read from the run's samples where a prompt
    has the same choices for every item; else "class N" (item-specific choices, no samples)."""
    labels = []
    for prompt in sorted(run.results.get(task) or {}):
        choices = [line.choices for line in (run.sample_lines(task, prompt) or [])[:3]]
        if choices and all(c == choices[0] for c in choices) and isinstance(choices[0], list) \
                and isinstance(cls, int) and 0 <= cls < len(choices[0]):
            labels.append(str(choices[0][cls]))
    unique = list(dict.fromkeys(labels))
    return " / ".join(f'"{x}"' for x in unique) if unique else f"class {cls}"


def items_table(task: str, metric: str, runs: Sequence[RunRecord]) -> TextTable:
    """Per model: n, limit, the chance and majority baselines of the headline metric, unparsed k / n per prompt, the
    answer rules."""
    rows = []
    thinking = any(task in r.reasoning for r in runs)
    for r in runs:
        if task not in r.results:
            continue
        base = r.baselines.get(task)
        majority = baseline_cell(base, "majority", metric)
        if isinstance(base, dict) and "majority_class" in base and majority != "–" and not majority.startswith("n/a"):
            majority += f" ({class_label(r, task, base['majority_class'])})"
        rows.append([r.display, evaluated_n({task: r.results[task]}), limit_text(r.config),
                     baseline_cell(base, "chance", metric), majority,
                     unparsed_cell(r.results[task]), rules_cell(r.parsed_by.get(task) or {})]
                    + ([trace_cell(r.reasoning.get(task))] if thinking else []))
    traces = ["traces (--thinking on)"] if thinking else []
    return TextTable(["model", "n", "limit", f"chance {metric}", f"majority {metric}", "unparsed k / n",
                      "parsed by rule", *traces],
                     rows, text_cols=7 + len(traces))

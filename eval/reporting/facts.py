"""What a run was, for every table and card built from it (report, push-results card).

From one results.json: the setting, constrained or not, system instruction, chat template
(and its hash), few-shot count and mode, split, n evaluated and the limit, time (compute
and wall, summed over resumed invocations, and how much came from the cache), whether the
run is finished, and per task the baselines and the answers each rule parsed.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..naming import is_local
from .settings_view import setting_label
from .tables import TextTable, fmt
from .unparsed_flag import MARK, is_flagged

from .worth import NOT_COMPARABLE, comparability_text, recorded_reasons

PERCENT = 100.0


def check_run_extras(path: Any, doc: dict) -> None:
    """The optional parts of a results.json a report reads (timing, tasks, parsed_by, baselines) have their
    documented shape; else one line naming the file and the key. Older files without them are fine."""
    def fail(key: str, expected: str) -> None:
        raise ValueError(f"{path}: {key} is not {expected}")

    for task, entry in (doc.get("timing") or {}).items() if isinstance(doc.get("timing") or {}, dict) else fail("timing", "an object"):
        values = entry.values() if isinstance(entry, dict) else [entry]
        if not all(_finite(v) is not None and v >= 0 for v in values):
            fail(f"timing.{task}", "a non-negative number or an object of them")
    tasks = doc.get("tasks")
    if tasks is not None and not (isinstance(tasks, dict) and all(isinstance(tasks.get(k, []), list) for k in ("planned", "skipped"))):
        fail("tasks", '{"planned": [...], "skipped": [...]}')
    parsed_by = doc.get("parsed_by") or {}
    if not isinstance(parsed_by, dict):
        fail("parsed_by", "an object")
    for task, prompts in parsed_by.items():
        for prompt, counts in (prompts.items() if isinstance(prompts, dict) else fail(f"parsed_by.{task}", "an object")):
            if not (isinstance(counts, dict) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts.values())):
                fail(f"parsed_by.{task}.{prompt}", "an object of rule -> count")
    baselines = doc.get("baselines") or {}
    if not (isinstance(baselines, dict) and all(isinstance(b, dict) for b in baselines.values())):
        fail("baselines", "an object of task -> {chance, majority}")


def _finite(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def timing_totals(timing: dict) -> dict[str, float | None]:
    """Sums over the tasks: wall_s, compute_s, requests, cached (None where the file has no such field).

    Accepts the older form too (task -> wall seconds of the last invocation only)."""
    totals: dict[str, float | None] = {"wall_s": None, "compute_s": None, "requests": None, "cached": None}
    for entry in (timing or {}).values():
        fields = entry if isinstance(entry, dict) else {"wall_s": entry}
        for key in totals:
            value = _finite(fields.get(key))
            if value is not None:
                totals[key] = (totals[key] or 0.0) + value
    return totals


def time_text(timing: dict) -> str:
    t = timing_totals(timing)
    if t["wall_s"] is None:
        return "–"
    text = f"{t['wall_s'] / 60:.1f} min wall"
    if t["compute_s"] is not None:
        text += f", {t['compute_s'] / 60:.1f} min compute"
    if t["requests"]:
        text += f", {int(t['cached'] or 0)} of {int(t['requests'])} requests from the cache"
    return text


def chat_text(config: dict) -> str:
    if not config.get("apply_chat_template"):
        return "no"
    ident = config.get("chat_template")
    if isinstance(ident, dict) and ident.get("sha256"):
        return f"yes, sha256 {str(ident['sha256'])[:12]}"
    if isinstance(ident, dict) and ident.get("source") == "server":
        return "yes, the server's"
    return "yes"


def fewshot_text(config: dict) -> str:
    k = config.get("num_fewshot") or 0
    if not k:
        return "0"
    if not config.get("apply_chat_template"):
        return f"{k}, in the prompt"
    return f"{k}, {'one user turn' if config.get('fewshot_as_multiturn') is False else 'multi-turn'}"


def split_text(config: dict) -> str:
    return "official" if not config.get("split") else f"{config['split']} ({NOT_COMPARABLE})"


def evaluated_n(results: dict) -> str:
    """Items per prompt over the run's tasks: one number, or the range."""
    ns = sorted({int(p["n"]) for prompts in results.values() for p in prompts.values() if _finite(p.get("n")) is not None})
    if not ns:
        return "–"
    return str(ns[0]) if len(ns) == 1 else f"{ns[0]}–{ns[-1]}"


def status_text(doc_status: str | None, tasks: dict | None, results: dict) -> str:
    if (doc_status or "complete") == "complete":
        return "complete"
    return f"partial run: {partial_counts(tasks, results)}"


def partial_counts(tasks: dict | None, results: dict) -> str:
    planned = list((tasks or {}).get("planned") or [])
    skipped = set((tasks or {}).get("skipped") or [])
    if not planned:
        return f"{len(results)} task(s) finished, of a number the file does not record"
    return f"{len(results)} of {len([t for t in planned if t not in skipped])} tasks finished"


def revision_text(model: dict) -> str:
    if model.get("revision"):
        return str(model["revision"])
    local = model.get("local_folder") or is_local(str(model.get("name_or_path") or ""))  # local_folder: published form
    return "– (local folder)" if local else "– (the Hub's default branch at run time)"


def run_rows(config: dict, model: dict, results: dict, timing: dict, status: str,
             reasons: list[str] | None = None) -> list[tuple[str, str]]:
    """(what, value) pairs that every table or card of a run states; ``reasons``: why the run is not comparable
    with the paper (worth.recorded_reasons of its results.json; None: those its config shows)."""
    if reasons is None:
        reasons = recorded_reasons({"config": config})
    return [
        ("setting", setting_label(config)),
        ("constrained", "yes" if config.get("constrained") else "no"),
        ("system instruction", config.get("system_instruction") or "none"),
        ("chat template", chat_text(config)),
        ("few-shot", fewshot_text(config)),
        ("split", split_text(config)),
        ("comparable with the paper", comparability_text(reasons)),
        ("n per prompt", evaluated_n(results)),
        ("limit", "all" if config.get("limit") is None else str(config["limit"])),
        ("revision", revision_text(model)),
        ("time", time_text(timing)),
        ("status", status),
    ]


def unparsed_cell(prompts: dict) -> str:
    """'p1 3 / 10, p2 0 / 10' (answers no rule read, per prompt), or '–' where the task has no count."""
    cells = [f"{p} {int(s['unparsed'])} / {int(s.get('n', 0))}" + (f" {MARK}" if is_flagged(s) else "") for p, s in prompts.items() if "unparsed" in s]
    return ", ".join(cells) if cells else "–"


def rules_cell(parsed_by: dict) -> str:
    """'p1: exact 7, start 1; p2: ...' from results.json parsed_by.<task>."""
    if not parsed_by:
        return "–"
    return "; ".join(f"{p}: " + ", ".join(f"{rule} {n}" for rule, n in counts.items()) for p, counts in parsed_by.items())


def trace_cell(traces: Any) -> str:
    """'p1: mean 412.5 tokens, forced 2, unfinished 1; p2: ...' from results.json reasoning.<task> (--thinking on), '–' without;
    a malformed record reads as such, never as numbers."""
    if not isinstance(traces, dict) or not traces:
        return "–"
    cells = []
    for prompt, t in traces.items():
        if not isinstance(t, dict):
            cells.append(f"{prompt}: (malformed)")
            continue
        mean = t.get("mean_trace_tokens")
        size = f"mean {mean} tokens" if isinstance(mean, (int, float)) and not isinstance(mean, bool) else "length not counted"
        cells.append(f"{prompt}: {size}, forced {t.get('forced', '?')}, unfinished {t.get('unfinished', '?')}")
    return "; ".join(cells)


def baseline_cell(baselines: dict | None, kind: str, metric: str) -> str:
    if not isinstance(baselines, dict):
        return "–"
    value = baselines.get(kind)
    if isinstance(value, str):
        return value  # "n/a (generative task)"
    score = _finite((value or {}).get(metric)) if isinstance(value, dict) else None
    return "–" if score is None else fmt(score * PERCENT, PERCENT)


def class_label(run: Any, task: str, cls: Any) -> str:
    """The answer of class ``cls`` as the prompts word it ("No" / "Falso"), read from the run's samples where a prompt
    has the same choices for every item; else "class N" (item-specific choices, no samples)."""
    import json

    labels = []
    for prompt in sorted(run.results.get(task) or {}):
        path = run.samples_path(task, prompt)
        try:
            with open(path, encoding="utf-8") as f:
                choices = [json.loads(line).get("choices") for line, _ in zip(f, range(3))]
        except (OSError, ValueError, AttributeError):
            continue
        if choices and all(c == choices[0] for c in choices) and isinstance(choices[0], list) \
                and isinstance(cls, int) and 0 <= cls < len(choices[0]):
            labels.append(str(choices[0][cls]))
    unique = list(dict.fromkeys(labels))
    return " / ".join(f'"{x}"' for x in unique) if unique else f"class {cls}"


def items_table(task: str, metric: str, runs: Sequence[Any]) -> TextTable:
    """Per model: n, limit, the chance and majority baselines of the headline metric, unparsed k / n per prompt, the answer rules."""
    rows = []
    thinking = any(task in (r.raw.get("reasoning") or {}) for r in runs if isinstance(r.raw.get("reasoning"), dict))
    for r in runs:
        if task not in r.results:
            continue
        base = (r.raw.get("baselines") or {}).get(task)
        majority = baseline_cell(base, "majority", metric)
        if isinstance(base, dict) and "majority_class" in base and majority not in ("–",) and not majority.startswith("n/a"):
            majority += f" ({class_label(r, task, base['majority_class'])})"
        rows.append([r.display, evaluated_n({task: r.results[task]}),
                     "all" if r.config.get("limit") is None else str(r.config["limit"]),
                     baseline_cell(base, "chance", metric), majority,
                     unparsed_cell(r.results[task]), rules_cell((r.raw.get("parsed_by") or {}).get(task) or {})]
                    + ([trace_cell((r.raw.get("reasoning") or {}).get(task))] if thinking else []))
    traces = ["traces (--thinking on)"] if thinking else []
    return TextTable(["model", "n", "limit", f"chance {metric}", f"majority {metric}", "unparsed k / n", "parsed by rule", *traces],
                     rows, text_cols=7 + len(traces))

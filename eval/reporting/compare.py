"""``evalita-eval compare A B``: per task and prompt, the score difference of two runs on the items both scored and a
paired test (exact McNemar for accuracies, else a paired bootstrap): docs/statistics.md, "compare"."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Sequence

from evalita_data.scoring.metric import HITS

from ..metrics import metric_of  # (task, name) -> the task's own declaration of the metric
from ..record import NOT_COMPARABLE, RecordError
from ..record.model import RunRecord, SampleLine
from . import stats
from .facts import setting_label
from .lm_eval_runs import is_lm_eval_output, lm_eval_notes, load_run
from .task_report import differing_prompts, headline_metric, recorded_metric, task_order, version_notes
from .tables import PERCENT, TextTable, fmt, md_text
from .worth import MIN_ITEMS, NOT_A_MEASUREMENT
from .unparsed_flag import none_read, untested_avgp_reason, untested_reason

# Why a prompt of the same name is not tested: the runs recorded different definitions (task_versions hashes).
CHANGED_PROMPT = "the prompt differs between the runs (another definition under the same name): not tested"


class MissingSamples(RecordError):
    """A run without the samples file of a task and prompt: that pair is not compared (a note says so)."""


@dataclass
class Comparison:
    task: str
    prompt: str
    metric: str
    n: int
    score_a: float  # fractions
    score_b: float
    difference: float  # score_a - score_b
    test: str  # "mcnemar" or "paired bootstrap"
    p_value: float | None  # None: not tested (a side has >= 10 % unparsed answers, issue 28)
    detail: str  # "b=3 c=1" or "95% CI [-0.05, 0.12]"
    resamples: int | None = None  # paired bootstrap: p has a resolution of 1 / resamples
    differing: int | None = None  # items whose prediction differs between the runs (None: AvgP, over prompts)


def p_text(c: Comparison) -> str:
    """p to 4 significant digits; a bootstrap p of 0 as '< 1/k' (no resample crossed 0); '–' when not tested."""
    if c.p_value is None:
        return "–"
    if c.resamples and c.p_value == 0:
        return f"< {1 / c.resamples:.2g}"
    return f"{c.p_value:.4g}"


def _item_key(run: RunRecord, by_document: bool):
    """How an item is named on both sides: our doc_id, or (with an lm-eval run, whose doc_id is only a position in
    its own split) the document as the prompt renders it; a repeated text counts its occurrences."""
    seen: dict = {}

    def key(s: SampleLine):
        if not by_document:
            return s.doc_id
        text = s.prompt
        if text is None:
            raise RecordError(f"{run.path}: a sample without its prompt: items cannot be matched by document")
        seen[text] = seen.get(text, 0) + 1
        return (text, seen[text])

    return key


def paired_samples(a: RunRecord, b: RunRecord, task: str,
                   prompt: str) -> tuple[list[SampleLine], list[SampleLine], str | None]:
    """The two runs' samples of one task and prompt on the items both scored, in the same order, and a note when
    one run scored items the other did not (another --limit); refused where an item's gold differs."""
    by_document = any(r.source_tool is not None for r in (a, b))
    sides = []
    for run in (a, b):
        path, samples = run.samples_path(task, prompt), run.sample_lines(task, prompt)
        if samples is None:
            raise MissingSamples(f"{task} {prompt}: no samples file {path}: not compared")
        by_id: dict = {}
        key = _item_key(run, by_document)
        for s in samples:  # checked by the record's reader (record/read.py): doc_id once each
            if not s.has_gold:
                raise RecordError(f"{path}: key gold: a sample without its gold answer (doc_id {s.doc_id})")
            k = key(s)
            if k in by_id:
                raise RecordError(f"{path}: doc_id {k!r} twice")
            by_id[k] = s
        sides.append((path, by_id))
    (path_a, ia), (path_b, ib) = sides
    common = set(ia) & set(ib)
    if not common:
        why = "; matched by the prompted document, so the few-shot examples and chat template must match too"
        raise RecordError(f"{task} {prompt}: the runs scored no item in common ({len(ia)} in {path_a}, {len(ib)} in "
                          f"{path_b}{why if by_document else ''}): not the same data")
    note = None
    if len(common) != len(ia) or len(common) != len(ib):
        note = (f"{task} {prompt}: compared on the {len(common)} item(s) both runs scored ({len(ia)} in A, {len(ib)} "
                "in B: another --limit or data); the scores in this table are over those items")
    ids = sorted(common, key=lambda x: (str(type(x)), x))
    for i in ids:
        if ia[i].gold != ib[i].gold:
            name = f"doc_id {ia[i].doc_id!r} of A (doc_id {ib[i].doc_id!r} of B)" if by_document else f"doc_id {i!r}"
            raise RecordError(f"{task} {prompt}: {name} has different gold answers in {path_a} and {path_b}: not the "
                              "same data")
    return [ia[i] for i in ids], [ib[i] for i in ids], note


def _bootstrapped(task: str, prompt: str, metric: str, items_a: list, items_b: list, metric_fn, k: int, seed: int,
                  differing: int | None = None) -> Comparison:
    """A against B by a paired bootstrap of ``metric_fn`` over the items (the same resampled items on both sides)."""
    res = stats.paired_bootstrap(items_a, items_b, metric_fn, k=k, seed=seed)
    ci = f"95% CI [{fmt(res.ci_low * PERCENT, PERCENT)}, {fmt(res.ci_high * PERCENT, PERCENT)}]"
    return Comparison(task, prompt, metric, len(items_a), metric_fn(items_a), metric_fn(items_b), res.difference,
                      f"paired bootstrap (k={k}, seed {seed})", res.p_value, ci, k, differing)


def compare_prompt(task: str, prompt: str, metric: str, lines_a: list[SampleLine], lines_b: list[SampleLine],
                   metric_fn, k: int, seed: int, kind: str | None = None) -> Comparison:
    """A against B on one prompt; ``kind``: the metric's kind as the runs recorded it (else the function's own)."""
    sa, sb = [s.line for s in lines_a], [s.line for s in lines_b]  # the scoring functions read samples as dicts
    differing = sum(x.prediction != y.prediction for x, y in zip(lines_a, lines_b))
    if (kind or getattr(metric_fn, "kind", None)) == HITS:  # per-item 0/1 hits: McNemar on the discordant items
        score_a, score_b = metric_fn(sa), metric_fn(sb)
        hits = [(metric_fn.sample(x), metric_fn.sample(y)) for x, y in zip(sa, sb)]
        only_a, only_b = sum(1 for x, y in hits if x and not y), sum(1 for x, y in hits if y and not x)
        return Comparison(task, prompt, metric, len(sa), score_a, score_b, score_a - score_b, "mcnemar",
                          stats.mcnemar_exact_pvalue(only_a, only_b), f"b={only_a} c={only_b}", differing=differing)
    return _bootstrapped(task, prompt, metric, sa, sb, metric_fn, k, seed, differing)


def compare_avgp(task: str, metric: str, paired: dict[str, tuple[list[SampleLine], list[SampleLine]]], metric_fn,
                 k: int, seed: int) -> Comparison:
    """AvgP (the mean over prompts) of A minus B: a paired bootstrap resampling the same items for every prompt."""
    prompts = list(paired)
    sizes = {len(sa) for sa, _sb in paired.values()}
    if len(sizes) != 1:
        raise ValueError(f"the prompts scored different numbers of items ({sorted(sizes)})")
    items_a = [tuple(paired[p][0][i].line for p in prompts) for i in range(sizes.pop())]
    items_b = [tuple(paired[p][1][i].line for p in prompts) for i in range(len(items_a))]

    def avgp(items: list[tuple]) -> float:
        return sum(metric_fn([item[j] for item in items]) for j in range(len(prompts))) / len(prompts)

    return _bootstrapped(task, "AvgP", metric, items_a, items_b, avgp, k, seed)


def _untested(c: Comparison, why: str | None) -> Comparison:
    """A difference on a flagged prompt is shown, not tested: no p-value, the reason in its place."""
    return c if why is None else replace(c, test="not tested", p_value=None, detail=why, resamples=None)


def compare_runs(path_a: Path, path_b: Path, k: int = 1000, seed: int = 0) -> tuple[list[Comparison], list[str]]:
    """Every task and prompt both runs have: the comparisons, and notes (what only one run has, setting mismatch)."""
    a, b = load_run(path_a, partial=True), load_run(path_b, partial=True)
    a.display, b.display = "A", "B"
    notes = lm_eval_notes([a, b])
    thinking = ["on" if r.config.thinking else "off" for r in (a, b)]
    if setting_label(replace(a.config, thinking=False)) == setting_label(replace(b.config, thinking=False)) \
            and thinking[0] != thinking[1]:
        notes.append(f"the runs differ in thinking (A {thinking[0]}, B {thinking[1]}): the same prompts and items, "
                     "paired by document")
    elif setting_label(a.config) != setting_label(b.config):
        notes.append(f"the runs differ in setting ({setting_label(a.config)} vs {setting_label(b.config)}): their "
                     "prompts of the same name are different prompts")
    notes += [f"{side}: {NOT_COMPARABLE}: {'; '.join(why)}"
              for side, run in (("A", a), ("B", b)) if (why := run.not_comparable_reasons)]
    notes += [f"{side}: {note}" for side, run in (("A", a), ("B", b)) for note in run.notes]
    only = sorted(set(a.results) ^ set(b.results))
    if only:
        notes.append(f"task(s) in one run only, not compared: {', '.join(only)}")
    rows = []
    for task in task_order(set(a.results) & set(b.results)):
        available = [m for m in a.results[task][next(iter(a.results[task]))] if m not in ("n", "unparsed")]
        metric, note = headline_metric(task, available, [a, b])
        notes += ([note] if note else []) + version_notes(task, [a, b])
        changed = differing_prompts([a.task_versions.get(task), b.task_versions.get(task)])
        recorded = recorded_metric(task, metric, [a, b])
        paired: dict[str, tuple[list[SampleLine], list[SampleLine]]] = {}
        for prompt in sorted(set(a.results[task]) & set(b.results[task])):
            try:
                sa, sb, note = paired_samples(a, b, task, prompt)
            except MissingSamples as err:
                notes.append(str(err))
                continue
            paired[prompt] = (sa, sb)
            notes += [note] if note else []
        try:
            fn = metric_of(task, metric)
            why = {p: (CHANGED_PROMPT
                       if p in changed else untested_reason(p, a.results[task].get(p), b.results[task].get(p)))
                   for p in paired}
            kind = recorded.kind if recorded is not None else None
            rows += [_untested(compare_prompt(task, p, metric, sa, sb, fn, k, seed, kind), why[p])
                     for p, (sa, sb) in paired.items()]
            if len({len(sa) for sa, _sb in paired.values()}) > 1:
                notes.append(f"{task} AvgP: not compared, its prompts were compared on different numbers of items")
            elif len(paired) > 1:
                edited = [p for p in paired if p in changed]
                avgp_why = f"{', '.join(edited)}: {CHANGED_PROMPT}" if edited else untested_avgp_reason(
                    [p for p in paired if why[p]],
                    [p for p in paired if any(none_read(r.results[task].get(p, {})) for r in (a, b))])
                rows.append(_untested(compare_avgp(task, metric, paired, fn, k, seed), avgp_why))
        except (KeyError, TypeError, ValueError) as err:  # samples without the fields the metric reads
            raise RecordError(f"{task}: cannot score {metric} from the samples of {a.path.parent} and {b.path.parent} "
                              f"({type(err).__name__}: {err})") from None
    if small := [f"{r.task} {r.prompt}" for r in rows if r.n < MIN_ITEMS]:
        notes.append(f"{NOT_A_MEASUREMENT}: {', '.join(small)}")
    return rows, notes


# compare's AvgP is over the prompts both runs scored, on the items both scored: not each run's own AvgP
# (report, run) where the runs' prompts or items differ; the table says so (issue 40).
AVGP_LABEL = "AvgP of shared prompts"
AVGP_EXPLAIN = (f"{AVGP_LABEL}: the mean over the prompts both runs scored, on the items both scored; it differs from "
                "a run's own AvgP (`run`, `report`) where the runs' prompts or items differ.")


def comparison_table(rows: Sequence[Comparison], name_a: str, name_b: str) -> TextTable:
    return TextTable(
        ["task", "prompt", "metric", "n", name_a, name_b, "A − B", "test", "p", "detail"],
        [[r.task, AVGP_LABEL if r.prompt == "AvgP" else r.prompt, r.metric, str(r.n),
          fmt(r.score_a * PERCENT, PERCENT), fmt(r.score_b * PERCENT, PERCENT),
          fmt(r.difference * PERCENT, PERCENT), r.test, p_text(r), r.detail] for r in rows],
        text_cols=3)


def write_comparison(path_a: Path, path_b: Path, out: Path | None, k: int = 1000, seed: int = 0) -> str:
    """The Markdown of the comparison; with ``out``, also compare.md and compare.json there."""
    rows, notes = compare_runs(path_a, path_b, k, seed)
    # a run as named: a results.json (a run folder's), an lm-eval output folder or results file
    run_a, run_b = (p / "results.json" if p.is_dir() and not is_lm_eval_output(p) else p for p in (path_a, path_b))
    per_prompt = [r for r in rows if r.differing is not None]
    notes.append(f"items with another prediction in A than in B: {sum(r.differing for r in per_prompt)} of "
                 f"{sum(r.n for r in per_prompt)} (over {len(per_prompt)} task-prompt pair(s))")
    text = "\n".join([f"A = {run_a}", f"B = {run_b}", "",
                      "Scores in percent; p < 0.05: the difference is unlikely to be chance on these items. A prompt "
                      "with 10 % or more unparsed answers on either side is not tested (its score rests on the "
                      "others). " + AVGP_EXPLAIN, "",
                      comparison_table(rows, "A", "B").markdown(), ""] + [f"> note: {md_text(n)}" for n in notes])
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(text + "\n", "utf-8")
        payload = {"a": str(run_a), "b": str(run_b), "bootstrap": {"k": k, "seed": seed},
                   "comparisons": [asdict(r) for r in rows], "notes": notes}
        (out / "compare.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return text

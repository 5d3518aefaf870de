"""``evalita-eval report``: multi-prompt tables, bootstrap CIs, rank scores and plots
from results.json files of ``evalita-eval run`` (format: docs/statistics.md)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from . import stats
from .. import metrics
from .facts import NOT_COMPARABLE, items_table, labels_of, setting_label, settings_table
from .render import render_context, run_notes, slug, summarize, to_html, to_markdown
from .lm_eval_runs import lm_eval_notes, load_run
from ..naming import display_name, given_name, is_local_model
from ..record import RecordError
from ..record.model import ModelRecord, RunRecord, plain
from .tables import PERCENT, TaskTable, TextTable, table_json
from .task_report import TaskReport, build_task_report, task_order
from .unparsed_flag import flag_notes, none_read, none_read_text

# (metric name, samples, task=entry name) -> score; the default resolves the name through the task's declaration.
ScoreSamples = Callable[..., float]


def add_bootstrap(rep: TaskReport, runs: Sequence[RunRecord], score_samples: ScoreSamples, k: int, seed: int,
                  progress: bool = False) -> None:
    """Bootstrap every (model, prompt) cell from its samples file; a missing file or a
    metric that cannot be recomputed leaves the task without CIs and says why."""
    from tqdm import tqdm

    t = rep.table
    by_name = {r.display: r for r in runs}
    cells = {}
    todo = [(m, p) for m in t.models for p in t.prompts]
    for model, prompt in tqdm(todo, desc=f"bootstrap {t.task}", disable=not progress, leave=False):
        run = by_name[model]
        samples = run.samples.get((t.task, prompt))  # read and checked with the run (record/read.py)
        if samples is None:
            t.notes.append(f"bootstrap omitted: no samples file {run.samples_path(t.task, prompt)}")
            return
        try:
            cells[(model, prompt)] = stats.bootstrap(
                samples, lambda s: PERCENT * score_samples(rep.metric, s, task=t.task), k=k, seed=seed)
        except (KeyError, ValueError, NotImplementedError) as err:
            t.notes.append(f"bootstrap omitted: cannot recompute {rep.metric!r} from samples ({err})")
            return
    rep.cells = cells
    # Same seed and item count -> the same resampled items for every prompt, so the
    # per-resample average over prompts is a bootstrap of AvgP.
    rep.avg_scores = {m: np.mean([cells[(m, p)].scores for p in t.prompts], axis=0) for m in t.models}
    rep.rank_basis = f"bootstrap of AvgP (k={k})"


def assign_display_names(runs: Sequence[RunRecord]) -> None:
    """The model's name (naming.display_name; a Hub id by its last part), widened where two runs share it:
    the whole Hub id, then @revision, then #i where still equal."""
    def name(model: ModelRecord, width: int) -> str:  # a given name or a local folder (its weights hash) as it is
        if given_name(model) is not None or is_local_model(model):
            return display_name(model)
        hub_id = model.name_or_path
        return (hub_id.rstrip("/").split("/")[-1], display_name(model), f"{hub_id}@{model.revision or 'main'}")[width]

    names = [name(r.model, 0) for r in runs]
    for width in (1, 2):
        names = [name(runs[i].model, width) if names.count(n) > 1 else n for i, n in enumerate(names)]
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        seen[n] = seen.get(n, 0) + 1
        runs[i].display = n if names.count(n) == 1 else f"{n} #{seen[n]}"


def _labelled_runs(paths: Sequence[Path], partial: bool) -> tuple[list, list[str]]:
    """The runs, each named for its tables, and their setting labels: one table per (task, setting
    label); the same model in several settings side by side (facts.settings_table)."""
    runs = [load_run(Path(p), partial) for p in paths]  # results.json, run folder or lm-eval output folder
    labels = labels_of(runs)
    for label in labels:
        group = [r for r in runs if setting_label(r.config) == label]
        assign_display_names(group)
        for r in group:
            # A non-official split is named in every table the run appears in.
            r.display += f" [split {r.config.split}: {NOT_COMPARABLE}]" if r.config.split else ""
            r.display += f" [{label}]" if len(labels) > 1 else ""
    return runs, labels


def _task_reports(runs: list, labels: list[str], tasks: list[str], k: int, seed: int, progress: bool,
                  score_samples: ScoreSamples) -> list:
    """One report per (task, setting label) some run has, with its bootstrap cells (k > 0), items and notes."""
    grouped = [(t, label, [r for r in runs if setting_label(r.config) == label]) for t in tasks for label in labels]
    present = [g for g in grouped if any(g[0] in r.results for r in g[2])]
    reports = [build_task_report(t, group) for t, _label, group in present]
    if k > 0:
        for rep in reports:
            add_bootstrap(rep, runs, score_samples, k, seed, progress)
    for rep, (t, label, group) in zip(reports, present):
        rep.items = items_table(t, rep.metric, group)
        rep.table.notes += [n for r in group if t in r.results for n in flag_notes(t, r.results[t], r.display)]  # #28
        rep.table.marks = {(p, r.display): none_read_text(scores) for r in group
                           for p, scores in r.results.get(t, {}).items() if none_read(scores)}  # issue 40
        if any(r.config.split and t in r.results for r in group):
            rep.table.notes.append(f"evaluated on a non-official split: {NOT_COMPARABLE}")
        if len(labels) > 1:
            rep.table.task = f"{t} [{label}]"
    return reports


# ---------------------------------------------------------------- PNG plots (matplotlib, Agg: no display needed)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["text.parse_math"] = False  # labels are names given by users ($x^{ is text, not mathtext)
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buf = io.BytesIO()
    # No Software/date metadata: the same report gives the same bytes.
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(fig)
    return buf.getvalue()


def heatmap_png(table: TaskTable, metric: str) -> bytes:
    """Models (rows) x prompts (columns), each cell annotated with its score."""
    plt = _pyplot()
    data = table.scores.T  # models x prompts
    n_models, n_prompts = data.shape
    fig, ax = plt.subplots(figsize=(2.2 + 1.0 * n_prompts, 1.2 + 0.55 * n_models))
    vmax = table.scale
    im = ax.imshow(data, cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto")
    ax.set_xticks(range(n_prompts), table.prompts)
    ax.set_yticks(range(n_models), table.models)
    ax.set(xlabel="prompt", title=f"{table.task}: {metric}" + (" (%)" if table.scale == 100.0 else ""))
    for i in range(n_models):
        for j in range(n_prompts):
            value = data[i, j]
            # Dark text on the light (high) end of viridis, white on the dark end.
            colour = "black" if value > 0.6 * vmax else "white"
            label = f"{value:.1f}" if table.scale == 100.0 else f"{value:.3f}"
            ax.text(j, i, label, ha="center", va="center", color=colour, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02)
    return _png(fig)


def rank_vs_alpha_png(models: Sequence[str], alphas: Sequence[float], ranks: np.ndarray, title: str) -> bytes:
    """ranks[a, m] = rank of model m at alphas[a]; one line per model, rank 1 on top."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 1.8 + 0.45 * len(models)))
    markers = "osD^v<>ph*"
    for m, name in enumerate(models):
        ax.plot(alphas, ranks[:, m], marker=markers[m % len(markers)], markersize=4, label=name)
    ax.set(xlabel="α (variance penalty of the Sharpe score)", ylabel="rank (1 = best)",
           yticks=range(1, len(models) + 1), ylim=(len(models) + 0.5, 0.5),
           xlim=(min(alphas) - 0.05, max(alphas) + 0.05), title=title)
    ax.grid(alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return _png(fig)


def _write_plots(plots_dir: Path, models: list[str], reports: list, summary) -> dict[str, bytes]:
    """plots/*.png (the rank-vs-alpha plot of several models, a heatmap per task); the images by file name."""
    plots_dir.mkdir(parents=True, exist_ok=True)
    images: dict[str, bytes] = {}
    if len(models) > 1 and summary.common_tasks:
        images["rank_vs_alpha.png"] = rank_vs_alpha_png(
            models, stats.ALPHAS, summary.ranks_by_alpha,
            f"Rank by mean Sharpe score over {len(summary.common_tasks)} task(s) vs α")
    for rep in reports:
        images[f"heatmap_{slug(rep.table.task)}.png"] = heatmap_png(rep.table, rep.metric)
    for name, png in images.items():
        (plots_dir / name).write_bytes(png)
    return images


def _report_json(runs: list, reports: list, summary, context: dict, alpha: float, k: int, seed: int,
                 notes: list[str]) -> dict:
    def table(t: TextTable | None) -> dict | None:
        return {"headers": t.headers, "rows": t.rows} if t else None

    interval = ("point", "mean", "ci_low", "ci_high", "pct_low", "pct_high")
    tasks = {rep.table.task: {"metric": rep.metric, "rank_basis": rep.rank_basis, **table_json(rep.table, alpha),
                              "items": table(rep.items),
                              "bootstrap": {f"{m}/{p}": {key: getattr(b, key) for key in interval}
                                            for (m, p), b in rep.cells.items()}}
             for rep in reports}
    return {"alpha": alpha, "bootstrap": {"k": k, "seed": seed}, "scale": PERCENT,
            "models": {r.display: {"model": plain(r.model), "results_file": str(r.path)} for r in runs},  # as recorded
            "tasks": tasks, "mean_rank_score": summary.rank_scores, "settings": table(context["settings"]),
            "notes": notes}


def write_report(paths: Sequence[Path], out: Path, k: int = 100, seed: int = 0, alpha: float = 1.0,
                 progress: bool = False, score_samples: ScoreSamples = metrics.score_samples,
                 partial: bool = False) -> list[Path]:
    """Write report.md, report.html (self-contained), report.json and plots/*.png into ``out``.

    ``partial``: an unfinished run's finished tasks are reported, marked as such."""
    runs, labels = _labelled_runs(paths, partial)
    models = [r.display for r in runs]
    tasks = task_order({t for r in runs for t in r.results})
    if not tasks:
        raise RecordError("no task results in the given files")
    general_notes = run_notes(runs) + lm_eval_notes(runs)
    reports = _task_reports(runs, labels, tasks, k, seed, progress, score_samples)
    summary = summarize(reports, models)
    plots_dir = out / "plots"
    images = _write_plots(plots_dir, models, reports, summary)
    context = render_context(runs, reports, summary, alpha, k, seed, general_notes)
    context["settings"] = settings_table(runs, tasks)
    (out / "report.md").write_text(to_markdown(context), encoding="utf-8")
    (out / "report.html").write_text(to_html(context, images), encoding="utf-8")
    payload = _report_json(runs, reports, summary, context, alpha, k, seed, general_notes)
    (out / "report.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return [out / "report.md", out / "report.html", out / "report.json", plots_dir]

"""Bootstrap confidence intervals of each (model, prompt) score, recomputed from the per-sample records."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..record.model import RunRecord
from . import stats
from .runs import PERCENT, ScoreSamples
from .task_report import TaskReport


def load_score_samples() -> ScoreSamples | None:
    try:
        from ..metrics import score_samples  # written by the evaluator
    except ImportError:
        return None
    return score_samples


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
            res = stats.bootstrap(samples, lambda s: PERCENT * score_samples(rep.metric, s, task=t.task), k=k,
                                  seed=seed)
        except (KeyError, ValueError, NotImplementedError) as err:
            t.notes.append(f"bootstrap omitted: cannot recompute {rep.metric!r} from samples ({err})")
            return
        cells[(model, prompt)] = res
    rep.cells = cells
    # Same seed and item count -> the same resampled items for every prompt, so the
    # per-resample average over prompts is a bootstrap of AvgP.
    rep.avg_scores = {m: np.mean([cells[(m, p)].scores for p in t.prompts], axis=0) for m in t.models}
    rep.rank_basis = f"bootstrap of AvgP (k={k})"

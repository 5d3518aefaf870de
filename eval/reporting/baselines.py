"""Chance and majority-class baselines of a multiple-choice task, from the evaluated gold labels (docs/statistics.md,
"Baselines"); generative tasks have neither: their entry says ``n/a``.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from evalita_data.scoring.metric import HITS
from evalita_data.taskspec import Metric

CHANCE_DRAWS = 500
CHANCE_SEED = 0
NOT_APPLICABLE = "n/a (generative task)"


def _score(metric: Metric, golds: Sequence[int], predictions: Sequence[int]) -> float:
    return float(metric([{"prediction": int(p), "gold": int(g)} for g, p in zip(golds, predictions)]))


def chance_score(metric: Metric, golds: Sequence[int], n_choices: Sequence[int]) -> float:
    """Expected ``metric`` of uniform random predictions (exact for per-item hits, else a seeded mean)."""
    if metric.kind == HITS:  # the mean of P(a random choice is the gold one)
        return sum(1.0 / k for k in n_choices) / len(n_choices)
    import numpy as np

    rng = np.random.default_rng(CHANCE_SEED)
    draws = (rng.random((CHANCE_DRAWS, len(golds))) * np.asarray(n_choices)).astype(int)
    return float(np.mean([_score(metric, golds, row) for row in draws]))


def task_baselines(metrics: Sequence[Metric], golds: Sequence[int], n_choices: Sequence[int]) -> dict:
    """{"n", "majority_class", "chance": {metric: score}, "majority": {metric: score}} for one MC task."""
    if not golds:
        raise ValueError("baselines need at least one gold label")
    counts = Counter(golds)
    majority = min(counts, key=lambda c: (-counts[c], c))
    return {"n": len(golds), "majority_class": majority,
            "chance": {m.name: chance_score(m, golds, n_choices) for m in metrics},
            "majority": {m.name: _score(m, golds, [majority] * len(golds)) for m in metrics}}


def generative_baselines(n: int) -> dict:
    return {"n": n, "chance": NOT_APPLICABLE, "majority": NOT_APPLICABLE}

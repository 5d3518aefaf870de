"""Scores across prompts, models and test items: the Evalita-LLM paper's MinP/MaxP/AvgP/Sat/CPS, the Sharpe score,
EuroEval's bootstrap and mean rank score, on their input's ``scale`` (definitions: docs/statistics.md). Pure functions
over numpy arrays; no torch."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence, TypeVar

import numpy as np

T = TypeVar("T")

SHARPE_DDOF = 0  # population std over the prompts (docs/statistics.md, "Definitions")
ALPHAS: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(21))  # 0.0 .. 2.0


@dataclass(frozen=True)
class SpreadStats:
    """Summary of one set of scores (one model across prompts, or one prompt across models)."""

    min: float
    max: float
    avg: float
    sat: float  # 1 - (max - avg) / scale: 1 when every score reaches the best one
    cps: float  # Combined Performance Score = sat * max

    def as_dict(self) -> dict[str, float]:
        return {"MinP": self.min, "MaxP": self.max, "AvgP": self.avg, "Sat": self.sat, "CPS": self.cps}


def spread_stats(scores: Sequence[float], scale: float = 1.0) -> SpreadStats:
    """MinP, MaxP, AvgP, Sat and CPS of ``scores``."""
    arr = _finite_1d(scores, "scores")
    mx, avg = float(arr.max()), float(arr.mean())
    sat = 1.0 - (mx - avg) / scale
    return SpreadStats(min=float(arr.min()), max=mx, avg=avg, sat=sat, cps=sat * mx)


@dataclass(frozen=True)
class TableStats:
    """Both views of a prompts x models table of one task."""

    per_prompt: list[SpreadStats]  # one per row: across the models
    per_model: list[SpreadStats]  # one per column: across the prompts
    sharpe: list[float]  # one per column: Sharpe score across the prompts


def table_stats(scores: np.ndarray, scale: float = 1.0, alpha: float = 1.0) -> TableStats:
    """``scores[i, j]`` = score of prompt i with model j (the paper's table layout)."""
    table = np.asarray(scores, dtype=float)
    if table.ndim != 2 or 0 in table.shape:
        raise ValueError(f"expected a non-empty prompts x models table, got shape {table.shape}")
    return TableStats(per_prompt=[spread_stats(row, scale) for row in table],
                      per_model=[spread_stats(col, scale) for col in table.T],
                      sharpe=[sharpe_score(col, alpha, scale) for col in table.T])


def sharpe_score(scores: Sequence[float], alpha: float = 1.0, scale: float = 1.0, ddof: int = SHARPE_DDOF) -> float:
    """mean / (alpha * std / scale + 1): the mean, penalised by the spread across prompts (alpha = 0: the mean)."""
    arr = _finite_1d(scores, "scores")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    std = float(arr.std(ddof=ddof)) if arr.size > ddof else 0.0
    return float(arr.mean()) / (alpha * std / scale + 1.0)


def rank_descending(values: Sequence[float], higher_is_better: bool = True) -> list[int]:
    """1-based ranks, best first (the largest; the smallest with ``higher_is_better`` False); ties keep input order."""
    order = sorted(range(len(values)), key=lambda i: -values[i] if higher_is_better else values[i])
    ranks = [0] * len(values)
    for rank, i in enumerate(order, 1):
        ranks[i] = rank
    return ranks


# ---------------------------------------------------------------- bootstrap


@dataclass(frozen=True)
class BootstrapResult:
    """k bootstrap scores of one metric and their summary (docs/statistics.md, "Bootstrap over test items")."""

    point: float  # the metric on the original, not resampled, items
    mean: float
    std: float  # sample std (ddof=1) of the bootstrap scores
    ci_low: float  # mean -+ 1.96 * std / sqrt(k): EuroEval's interval of the mean
    ci_high: float
    pct_low: float  # 2.5th / 97.5th percentiles of the scores: the usual percentile interval, wider
    pct_high: float
    scores: np.ndarray

    @property
    def k(self) -> int:
        return int(self.scores.size)


def bootstrap_indices(n: int, k: int, seed: int) -> np.ndarray:
    """k rows of n item indices drawn with replacement from a Generator seeded with ``seed``."""
    if n <= 0 or k <= 0:
        raise ValueError(f"bootstrap needs n > 0 items and k > 0 resamples, got n={n}, k={k}")
    return np.random.default_rng(seed).integers(0, n, size=(k, n))


def summarize_bootstrap(scores: Sequence[float], point: float = math.nan) -> BootstrapResult:
    arr = _finite_1d(scores, "bootstrap scores")
    mean = float(arr.mean())
    std = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
    half = 1.96 * std / math.sqrt(arr.size)
    return BootstrapResult(point=point, mean=mean, std=std, ci_low=mean - half, ci_high=mean + half,
                           pct_low=float(np.percentile(arr, 2.5)), pct_high=float(np.percentile(arr, 97.5)), scores=arr)


def bootstrap(samples: Sequence[T], metric: Callable[[list[T]], float], k: int = 1000, seed: int = 0,
              indices: np.ndarray | None = None) -> BootstrapResult:
    """Resample the test items k times and recompute ``metric`` (a corpus-level number of a list of samples: F1 is
    recomputed, not averaged) on each resample; ``indices`` (k x n) replaces the seeded draw, for tests."""
    items = list(samples)
    idx = bootstrap_indices(len(items), k, seed) if indices is None else np.asarray(indices)
    scores = [float(metric([items[i] for i in row])) for row in idx]
    return summarize_bootstrap(scores, point=float(metric(items)))


# ---------------------------------------------------------------- mean rank score


def welch_greater_pvalue(a: Sequence[float], b: Sequence[float]) -> float:
    """p-value of the one-sided Welch t-test H1: mean(a) > mean(b)."""
    x, y = _finite_1d(a, "a"), _finite_1d(b, "b")
    vx = x.var(ddof=1) / x.size if x.size > 1 else 0.0
    vy = y.var(ddof=1) / y.size if y.size > 1 else 0.0
    diff = float(x.mean() - y.mean())
    if vx + vy == 0.0:
        # No spread at all: the difference is certain (or there is none).
        return 0.0 if diff > 0 else 1.0
    from scipy import stats as sps

    return float(sps.ttest_ind(x, y, equal_var=False, alternative="greater").pvalue)


def dataset_rank_scores(model_scores: Mapping[str, Sequence[float]], significance: float = 0.05,
                        higher_is_better: bool = True) -> dict[str, float]:
    """EuroEval rank scores of the models on one dataset, in the metric's direction (docs/statistics.md)."""
    means = {m: float(np.mean(_finite_1d(s, f"scores of {m}"))) for m, s in model_scores.items()}
    sign = 1.0 if higher_is_better else -1.0
    order = sorted(means, key=lambda m: -sign * means[m])  # stable: ties keep input order
    spread = float(np.std(list(means.values())))
    ranks: dict[str, float] = dict.fromkeys(order[:1], 1.0)
    for prev, model in zip(order, order[1:]):
        better, worse = model_scores[prev], model_scores[model]
        if not higher_is_better:
            better, worse = worse, better
        significant = spread > 0 and welch_greater_pvalue(better, worse) < significance
        ranks[model] = ranks[prev] + (abs(means[prev] - means[model]) / spread if significant else 0.0)
    return ranks


def mean_rank_scores(scores: Mapping[str, Mapping[str, Sequence[float]]], significance: float = 0.05,
                     higher_is_better: Mapping[str, bool] | None = None) -> dict[str, float]:
    """scores[dataset][model] = bootstrap scores -> each model's mean rank score over the
    datasets it was evaluated on (``higher_is_better[dataset]``: its metric's direction, default higher)."""
    per_model: dict[str, list[float]] = {}
    for dataset, dataset_scores in scores.items():
        direction = True if higher_is_better is None else higher_is_better.get(dataset, True)
        for model, rank in dataset_rank_scores(dataset_scores, significance, direction).items():
            per_model.setdefault(model, []).append(rank)
    return {m: float(np.mean(r)) for m, r in per_model.items()}


def _finite_1d(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float).reshape(-1)
    if arr.size == 0:
        raise ValueError(f"{what}: no values")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: not all finite: {arr.tolist()}")
    return arr


# ---------------------------------------------------------------- paired tests (compare)


def mcnemar_exact_pvalue(b: int, c: int) -> float:
    """Exact two-sided McNemar test: ``b`` items only model 1 got right, ``c`` only model 2 (docs/statistics.md)."""
    if b < 0 or c < 0:
        raise ValueError(f"McNemar counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


@dataclass(frozen=True)
class PairedBootstrap:
    difference: float  # metric(a) - metric(b) on the original items
    p_value: float  # two-sided (docs/statistics.md, "compare")
    ci_low: float  # 2.5th / 97.5th percentiles of the resampled differences
    ci_high: float


def paired_bootstrap(a: Sequence[T], b: Sequence[T], metric: Callable[[list[T]], float], k: int = 1000,
                     seed: int = 0) -> PairedBootstrap:
    """The differences of the corpus metric on k resamples of the *same* items of both systems (``a[i]``, ``b[i]``)."""
    if len(a) != len(b):
        raise ValueError(f"paired bootstrap needs the same items on both sides, got {len(a)} and {len(b)}")
    observed = float(metric(list(a)) - metric(list(b)))
    diffs = np.array([metric([a[i] for i in row]) - metric([b[i] for i in row])
                      for row in bootstrap_indices(len(a), k, seed)])
    # the share of resampled differences on the other side of 0; no observed difference: p = 1
    other = float(np.mean(diffs <= 0)) if observed > 0 else float(np.mean(diffs >= 0)) if observed < 0 else 0.5
    return PairedBootstrap(observed, min(1.0, 2.0 * other), float(np.percentile(diffs, 2.5)),
                           float(np.percentile(diffs, 97.5)))

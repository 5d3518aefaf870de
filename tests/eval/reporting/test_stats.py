"""eval/reporting/stats.py: the paper's Table 14, Sharpe, bootstrap and rank scores on hand-computed cases."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from evalita_eval.reporting import stats
from evalita_eval.reporting.tables import fmt

# Evalita-LLM paper, Table 14 (textual entailment): rows p1..p6, columns LLM-1..LLM-6, percent.
TABLE14 = np.array([
    [55.00, 68.25, 45.25, 64.50, 75.50, 64.00],
    [55.00, 56.50, 55.00, 59.00, 78.75, 69.25],
    [70.25, 64.75, 55.00, 49.25, 73.25, 60.50],
    [65.00, 63.50, 55.00, 61.25, 74.75, 61.75],
    [55.75, 54.25, 55.00, 60.50, 57.50, 49.00],
    [55.00, 59.00, 55.75, 57.75, 60.75, 45.50],
])


def printed(s: stats.SpreadStats, *keys: str) -> list[str]:
    return [fmt(s.as_dict()[k], 100.0) for k in keys]


def test_table14_per_prompt_rows():
    st = stats.table_stats(TABLE14, scale=100.0)
    assert printed(st.per_prompt[0], "MinP", "MaxP", "AvgP", "CPS") == ["45.25", "75.50", "62.08", "65.37"]
    assert printed(st.per_prompt[3], "MinP", "MaxP", "AvgP", "CPS") == ["55.00", "74.75", "63.54", "66.37"]


def test_table14_per_model_columns():
    st = stats.table_stats(TABLE14, scale=100.0)
    assert printed(st.per_model[0], "MaxP", "AvgP", "CPS") == ["70.25", "59.33", "62.58"]
    # CPS of LLM-5 is exactly 71.925: the paper rounds half up.
    assert printed(st.per_model[4], "MaxP", "AvgP", "CPS") == ["78.75", "70.08", "71.93"]


def test_cps_is_scale_free():
    pct = stats.spread_stats(TABLE14[:, 4], scale=100.0)
    frac = stats.spread_stats(TABLE14[:, 4] / 100, scale=1.0)
    assert frac.cps * 100 == pytest.approx(pct.cps)
    assert frac.sat == pytest.approx(pct.sat) == pytest.approx(1 - (78.75 - 420.5 / 6) / 100)


def test_sat_is_one_when_all_prompts_equal():
    s = stats.spread_stats([0.4, 0.4, 0.4])
    assert (s.min, s.max, s.avg, s.sat, s.cps) == (0.4, 0.4, pytest.approx(0.4), pytest.approx(1.0), pytest.approx(0.4))


def test_spread_stats_rejects_empty_and_nan():
    with pytest.raises(ValueError, match="no values"):
        stats.spread_stats([])
    with pytest.raises(ValueError, match="finite"):
        stats.spread_stats([0.5, float("nan")])


def test_sharpe_by_hand():
    # mean 0.7, population std 0.1
    assert stats.sharpe_score([0.6, 0.8], alpha=0) == pytest.approx(0.7)
    assert stats.sharpe_score([0.6, 0.8], alpha=1) == pytest.approx(0.7 / 1.1)
    assert stats.sharpe_score([0.6, 0.8], alpha=2) == pytest.approx(0.7 / 1.2)
    assert stats.sharpe_score([60, 80], alpha=1, scale=100) == pytest.approx(70 / 1.1)
    # sample std (ddof=1) = 0.1 * sqrt(2)
    assert stats.sharpe_score([0.6, 0.8], alpha=1, ddof=1) == pytest.approx(0.7 / (1 + 0.1 * math.sqrt(2)))
    with pytest.raises(ValueError, match="alpha"):
        stats.sharpe_score([0.5], alpha=-1)


def test_sharpe_ranks_cross_when_variance_is_penalised():
    steady, spiky = [0.60, 0.60, 0.60], [0.90, 0.30, 0.90]  # means 0.60 and 0.70
    ranks = [stats.rank_descending([stats.sharpe_score(s, a) for s in (steady, spiky)]) for a in (0.0, 1.0)]
    # alpha 0: spiky (0.70) first; alpha 1: 0.70 / (1 + 0.2828) = 0.5457 < 0.60
    assert ranks == [[2, 1], [1, 2]]
    assert len(stats.ALPHAS) == 21 and stats.ALPHAS[0] == 0.0 and stats.ALPHAS[-1] == 2.0


def test_bootstrap_with_given_indices_by_hand():
    res = stats.bootstrap([1, 0, 0, 1], lambda s: sum(s) / len(s), indices=np.array([[0, 0, 0, 0], [0, 1, 2, 3], [1, 1, 2, 2]]))
    assert res.scores.tolist() == [1.0, 0.5, 0.0]
    assert res.point == 0.5 and res.mean == pytest.approx(0.5) and res.std == pytest.approx(0.5)
    half = 1.96 * 0.5 / math.sqrt(3)
    assert (res.ci_low, res.ci_high) == (pytest.approx(0.5 - half), pytest.approx(0.5 + half))
    assert (res.pct_low, res.pct_high) == (pytest.approx(0.025), pytest.approx(0.975))
    assert res.k == 3


def f1_positive(samples: list[tuple[int, int]]) -> float:
    tp = sum(p == 1 and g == 1 for p, g in samples)
    fp = sum(p == 1 and g == 0 for p, g in samples)
    fn = sum(p == 0 and g == 1 for p, g in samples)
    return 2 * tp / (2 * tp + fp + fn)


def test_bootstrap_recomputes_corpus_metric_on_each_resample():
    items = [(1, 1), (1, 0), (0, 1), (0, 0)]
    res = stats.bootstrap(items, f1_positive, indices=np.array([[0, 0, 1, 2], [0, 3, 3, 3]]))
    # resample 1: tp 2, fp 1, fn 1 -> 4/6; resample 2: tp 1 -> 2/2
    assert res.scores.tolist() == pytest.approx([4 / 6, 1.0])
    assert res.point == pytest.approx(0.5)


def test_bootstrap_is_seeded():
    items = list(range(50))
    metric = lambda s: float(np.mean(s))  # noqa: E731
    a, b = stats.bootstrap(items, metric, k=30, seed=7), stats.bootstrap(items, metric, k=30, seed=7)
    c = stats.bootstrap(items, metric, k=30, seed=8)
    assert a.scores.tolist() == b.scores.tolist()
    assert a.scores.tolist() != c.scores.tolist()
    idx = stats.bootstrap_indices(50, 30, 7)
    assert idx.shape == (30, 50) and idx.min() >= 0 and idx.max() <= 49
    with pytest.raises(ValueError, match="n > 0"):
        stats.bootstrap_indices(0, 10, 0)


def test_welch_pvalue_by_hand():
    a, b = [1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 2.0]
    va, vb = (5 / 3) / 4, 1.0 / 3  # sample variances / n
    t = 1.5 / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 2)
    from scipy.stats import t as tdist

    assert stats.welch_greater_pvalue(a, b) == pytest.approx(float(tdist.sf(t, df)))
    assert 0.05 < stats.welch_greater_pvalue(a, b) < 0.1  # t = 1.73 on ~5 df
    assert stats.welch_greater_pvalue([2, 2], [1, 1]) == 0.0  # no spread, certain difference
    assert stats.welch_greater_pvalue([1, 1], [1, 1]) == 1.0


def test_mean_rank_scores_hand_made_case():
    scores = {
        # A far ahead; B significantly worse than A; C (mean 5.8) not significantly worse than B (6.0)
        "d1": {"A": [10.0, 10.5, 9.5], "B": [6.0, 6.5, 5.5], "C": [5.8, 6.3, 5.3]},
        # a tie: no model is worse, both rank 1
        "d2": {"A": [1.0, 1.0, 1.0], "B": [1.0, 1.0, 1.0]},
    }
    d1 = stats.dataset_rank_scores(scores["d1"])
    step = 4.0 / float(np.std([10.0, 6.0, 5.8]))  # |10 - 6| / population std of the means
    assert d1["A"] == 1.0
    assert d1["B"] == pytest.approx(1 + step) == pytest.approx(3.0677, abs=1e-4)
    assert d1["C"] == d1["B"]
    overall = stats.mean_rank_scores(scores)
    assert overall == {"A": 1.0, "B": pytest.approx((1 + step + 1) / 2), "C": pytest.approx(1 + step)}


def test_stats_does_not_import_torch():
    code = "import sys, evalita_eval.reporting.stats, evalita_eval.reporting.tables; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0

"""Metrics declare their kind (per-item 0/1 hits or corpus) and direction; compare, the chance
baseline and ranking read the declaration, never the metric's name."""

from __future__ import annotations

import pytest

from evalita_data.scoring.metric import CORPUS, HITS, Metric
from evalita_data.scoring.metrics import ACC, ACC_BYTES, ACC_NORM, F1_MACRO, NER_F1
from evalita_eval.metrics import ROUGE_L_ANSWER, higher_is_better
from evalita_eval.reporting import stats
from evalita_eval.reporting.baselines import chance_score
from evalita_eval.record.model import SampleLine
from evalita_eval.reporting.compare import compare_prompt


def _mean(values: list) -> float:
    return sum(values) / len(values)


# A 0/1 metric whose name says nothing; and an accuracy-named corpus metric.
EXACT = Metric("exact", lambda s: float(s["prediction"] == s["gold"]), _mean, kind=HITS)
ACC_LIKE_F1 = Metric("acc_weighted", lambda s: (s["gold"], s["prediction"]), lambda items: F1_MACRO.corpus(items))


def test_the_declarations():
    assert [m.kind for m in (ACC, ACC_NORM, ACC_BYTES)] == [HITS] * 3
    assert [m.kind for m in (F1_MACRO, NER_F1, ROUGE_L_ANSWER)] == [CORPUS] * 3
    assert higher_is_better("te", "acc") and higher_is_better("not-a-task", "x")
    with pytest.raises(ValueError, match="kind 'accuracy'"):
        Metric("x", lambda s: 0, _mean, kind="accuracy")  # type: ignore[arg-type]


def test_chance_is_exact_for_hits_whatever_the_name():
    golds, n_choices = [0, 1, 1, 0], [2, 4, 4, 5]
    assert chance_score(EXACT, golds, n_choices) == (1 / 2 + 1 / 4 + 1 / 4 + 1 / 5) / 4
    # A corpus metric named acc*: the seeded estimate, not the hit formula (it would be 0.3).
    assert chance_score(ACC_LIKE_F1, golds, n_choices) != (1 / 2 + 1 / 4 + 1 / 4 + 1 / 5) / 4


def test_compare_picks_mcnemar_by_kind():
    sa = [SampleLine.of({"run_id": None, "doc_id": i, "prediction": p, "gold": g}) for i, (p, g) in enumerate([(1, 1), (0, 0), (1, 1), (1, 0), (0, 0)])]
    sb = [SampleLine.of({"run_id": None, "doc_id": i, "prediction": p, "gold": g}) for i, (p, g) in enumerate([(0, 1), (1, 0), (1, 1), (1, 0), (0, 0)])]
    hits = compare_prompt("t", "p1", "exact", sa, sb, EXACT, k=50, seed=0)
    # Only A right on items 0 and 1, only B right on none: b=2, c=0, p = 2 * (1/4) = 0.5.
    assert (hits.test, hits.detail, hits.p_value) == ("mcnemar", "b=2 c=0", 0.5)
    corpus = compare_prompt("t", "p1", "acc_weighted", sa, sb, ACC_LIKE_F1, k=50, seed=0)
    assert corpus.test.startswith("paired bootstrap")


def test_ranking_follows_the_declared_direction():
    assert stats.rank_descending([0.2, 0.9, 0.5]) == [3, 1, 2]
    assert stats.rank_descending([0.2, 0.9, 0.5], higher_is_better=False) == [1, 3, 2]
    scores = {"low": [1.0, 1.1, 0.9, 1.0], "high": [5.0, 5.1, 4.9, 5.0]}
    assert stats.dataset_rank_scores(scores)["high"] == 1.0
    lower = stats.dataset_rank_scores(scores, higher_is_better=False)
    assert lower["low"] == 1.0 and lower["high"] == pytest.approx(1.0 + 4.0 / 2.0)  # |5 - 1| / std(1, 5)
    assert stats.mean_rank_scores({"d": scores}, higher_is_better={"d": False}) == lower

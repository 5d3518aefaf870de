"""Corpus-level metrics computed from the per-sample records written to ``samples/*.jsonl``.

Each metric is a :class:`evalita_data.scoring.metric.Metric`: a sample function (one sample
dict -> its item value) and a corpus function (the item values, in order -> the score),
with ``higher_is_better``. Task declarations list these objects; the report finds one by
name through the task's own declaration (``evalita_eval.metrics.metric_of``). Every score
is a fraction in [0, 1]. The lm-eval-compatible metrics (``f1_binary``, ``sentipolc_f1``,
``ner_f1``, ``rel_f1``, ``ls_f1``, ``rouge*``) reproduce
``lm_eval/tasks/evalita_llm/{utils,metrics}.py`` of lm-evaluation-harness 0.4.13,
quirks included (documented in docs/evaluator.md); the ``*_strict`` ones are
plain micro-F1 over multisets of pairs.

Sample fields: MC ``loglikelihoods``, ``choices``, ``prediction`` (argmax index),
``gold`` (index); generative ``generation`` and ``gold`` (NER: the entity dicts;
REL: the [RML, EVENT] pairs; LS: the {word, count} answers; SUM: the reference text).
MC tasks answered by generation (``--setting ce|ce-ni|oe``, eval/settings/instruct.py) have no
``loglikelihoods``: the accuracies read their parsed ``prediction``.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import Callable, Sequence

from .metric import HITS, Metric
from .parsers import NO_REL, parse_ls, parse_ner, parse_rel

Samples = Sequence[dict]


def _argmax(values: Sequence[float]) -> int:
    """Index of the largest value, the first one on ties (as numpy.argmax)."""
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best


def mc_prediction(lls: Sequence[float], choices: Sequence[str], norm: str | None = None) -> int:
    """argmax of the log-likelihoods, divided by the choice's characters or UTF-8 bytes if ``norm``."""
    if norm is None:
        return _argmax(lls)
    if norm == "chars":
        return _argmax([ll / float(len(c)) for ll, c in zip(lls, choices)])
    if norm == "bytes":
        return _argmax([ll / float(len(c.encode("utf-8"))) for ll, c in zip(lls, choices)])
    raise ValueError(f"unknown normalisation {norm!r}")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _accuracy(name: str, norm: str | None) -> Metric:
    def hit(s: dict) -> float:
        # Generated answers (eval/settings/instruct.py) carry their parsed "prediction", no log-likelihoods.
        predicted = mc_prediction(s["loglikelihoods"], s["choices"], norm) if "loglikelihoods" in s else s["prediction"]
        return float(predicted == s["gold"])

    return Metric(name, hit, _mean, needs_loglikelihoods=norm is not None, kind=HITS)


def _class_f1(gold: Sequence[int], pred: Sequence[int], label: int) -> float:
    tp = sum(1 for g, p in zip(gold, pred) if g == label and p == label)
    fp = sum(1 for g, p in zip(gold, pred) if g != label and p == label)
    fn = sum(1 for g, p in zip(gold, pred) if g == label and p != label)
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def per_label_f1(gold: Sequence[int], pred: Sequence[int]) -> list[float]:
    """sklearn's f1_score(average=None): F1 of each label present in gold or prediction, sorted."""
    return [_class_f1(gold, pred, c) for c in sorted(set(gold) | set(pred))]


def macro_f1(gold: Sequence[int], pred: Sequence[int]) -> float:
    """sklearn's f1_score(average="macro")."""
    return _mean(per_label_f1(gold, pred))


def _concat_labels(items: list[tuple[list[int], list[int]]]) -> tuple[list[int], list[int]]:
    """(gold, predicted) labels of all samples' (predicted, gold) lists, concatenated as lm-eval's aggregations do."""
    gold: list[int] = []
    pred: list[int] = []
    for p, g in items:
        pred += p
        gold += g
    return gold, pred


def _gold_pred_item(s: dict) -> tuple[int, int]:
    return s["gold"], s["prediction"]


def _gold_pred(items: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    return [g for g, _ in items], [p for _, p in items]


def f1_macro(items: list[tuple[int, int]]) -> float:
    return macro_f1(*_gold_pred(items))


def f1_binary(items: list[tuple[int, int]]) -> float:
    """lm-eval's ``f1`` aggregation (WiC, HS): sklearn's binary F1 of class 1."""
    gold, pred = _gold_pred(items)
    return _class_f1(gold, pred, 1)


# SENTIPOLC classes -> (opos, oneg): positive, negative, neutral, mixed.
_SA_POLARITY = {0: (1, 0), 1: (0, 1), 2: (0, 0), 3: (1, 1)}


def sentipolc_f1(items: list[tuple[int, int]]) -> float:
    """Mean over opos and oneg of the mean F1 of their classes 0 and 1 (lm-eval ``_aggreg_sa``)."""
    gold, pred = _gold_pred(items)
    parts = []
    for axis in (0, 1):
        g = [_SA_POLARITY[x][axis] for x in gold]
        p = [_SA_POLARITY[x][axis] for x in pred]
        parts.append((_class_f1(g, p, 0) + _class_f1(g, p, 1)) / 2)
    return sum(parts) / 2


# -- NER ------------------------------------------------------------------------------
_NER_LABEL = {"PER": 0, "LOC": 1, "ORG": 2, "O": 3}


def ner_labels(generation: str, gold: list[dict]) -> tuple[list[int], list[int]]:
    """(predicted labels, gold labels) of one sentence, as lm-eval's ``ner_process_results``."""
    results = parse_ner(generation)
    gold_labels = [_NER_LABEL[e["type"]] for e in gold]
    res_labels = [0] * len(gold_labels)

    def mark_matches() -> list[int]:
        matched = []
        for r in results:
            for i, e in enumerate(gold):
                if r[0] == e["entity_text"] and r[1] == e["type"]:
                    res_labels[i] = _NER_LABEL[r[1]]
                    matched.append(i)
        return matched

    if len(results) > len(gold):
        mark_matches()
        # lm-eval counts each surplus prediction as gold "O" predicted as ORG.
        for _ in range(len(results) - len(gold)):
            gold_labels.append(3)
            res_labels.append(2)
    elif not results and not gold:
        return [3], [3]
    else:
        matched = mark_matches()
        for i in range(len(gold_labels)):
            if i not in matched:
                res_labels[i] = 3
    return res_labels, gold_labels


def ner_f1(items: list[tuple[list[int], list[int]]]) -> float:
    """lm-eval ``_aggreg_ner``: per-label F1 over all labels, mean of all but the last (``O``) one."""
    f1 = per_label_f1(*_concat_labels(items))
    if not f1:
        return 0.0
    return sum(f1[:-1]) / (len(f1) - 1) if len(f1) > 1 else f1[0]


def _strict_micro_f1(pairs: list[tuple[list[tuple], list[tuple]]]) -> float:
    """2·TP / (|pred| + |gold|) over multisets; 1.0 when there is nothing to find and nothing found."""
    tp = n_pred = n_gold = 0
    for pred, gold in pairs:
        tp += sum((Counter(pred) & Counter(gold)).values())
        n_pred += len(pred)
        n_gold += len(gold)
    return 2 * tp / (n_pred + n_gold) if n_pred + n_gold else 1.0


def ner_pairs(s: dict) -> tuple[list[tuple], list[tuple]]:
    """(predicted, gold) (entity text, type) pairs of one NER sample."""
    pred = [tuple(r) for r in parse_ner(s["generation"]) if isinstance(r, tuple)]
    return pred, [(e["entity_text"], e["type"]) for e in s["gold"]]


# -- REL ------------------------------------------------------------------------------
def rel_labels(generation: str, gold: list[list[str]]) -> tuple[list[int], list[int]]:
    """(predicted labels, gold labels) of one sentence, as lm-eval's ``rel_process_results_v3``."""
    answered = NO_REL not in generation
    if not answered:
        return ([0] * len(gold), [1] * len(gold)) if gold else ([0], [0])
    if not gold:
        return [1], [0]
    results: list = parse_rel(generation)
    gold_labels = [1] * len(gold)
    res_labels = [0] * len(gold)
    deleted = ("DELETED", "DELETED")
    for i in range(len(gold)):
        for j in range(len(results)):
            if results[j][0] == gold[i][0] and results[j][1] == gold[i][1]:
                res_labels[i] = 1
                results[j] = deleted
    # lm-eval checks the *first* surplus-many predictions for having been matched.
    for i in range(len(results) - len(gold)):
        if results[i] != deleted:
            res_labels.append(1)
            gold_labels.append(0)
    return res_labels, gold_labels


def rel_f1(items: list[tuple[list[int], list[int]]]) -> float:
    """lm-eval ``_aggreg_rel``: sklearn macro F1 over the concatenated 0/1 labels."""
    return macro_f1(*_concat_labels(items))


def rel_pairs(s: dict) -> tuple[list[tuple], list[tuple]]:
    """(predicted, gold) (RML, EVENT) pairs of one REL sample."""
    pred = [] if s["generation"] == "" else parse_rel(s["generation"])
    return pred, [tuple(r) for r in s["gold"]]


# -- LS -------------------------------------------------------------------------------
def ls_item(generation: str, gold: list[dict]) -> tuple[float, int, int]:
    """(credit, answered, annotated) of one item, as lm-eval's ``ls_process_results``."""
    words = [a["word"] for a in gold]
    counts = [int(a["count"]) for a in gold]
    results = parse_ls(generation)
    credit = 0.0
    for r in results:
        if r in words:
            credit += counts[words.index(r)]
    total = sum(counts)
    if total:
        credit /= total
    return credit, int(bool(results)), int(bool(words))


def ls_f1(items: list[tuple[float, int, int]]) -> float:
    """F1 of precision = credits / items answered and recall = credits / items with gold."""
    credit = sum(i[0] for i in items)
    answered = sum(i[1] for i in items) or 1
    annotated = sum(i[2] for i in items) or 1
    prec, rec = credit / answered, credit / annotated
    return 2 * prec * rec / (prec + rec) if prec + rec else 0.0


# -- SUM ------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _rouge_scorer(kind: str):
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer([kind], use_stemmer=False)


def rouge_metric(kind: str, name: str = "", reference: str = "gold", prepare: Callable[[str], str] = str) -> Metric:
    def fmeasure(s: dict) -> float:
        return _rouge_scorer(kind).score(prepare(s[reference]), prepare(s["generation"]))[kind].fmeasure

    return Metric(name or kind, fmeasure, _mean)


def _on_generation(labeller: Callable[[str, list], tuple]) -> Callable[[dict], tuple]:
    return lambda s: labeller(s["generation"], s["gold"])


ACC = _accuracy("acc", None)
ACC_NORM = _accuracy("acc_norm", "chars")
ACC_BYTES = _accuracy("acc_bytes", "bytes")
F1_MACRO = Metric("f1_macro", _gold_pred_item, f1_macro)
F1_BINARY = Metric("f1_binary", _gold_pred_item, f1_binary)
SENTIPOLC_F1 = Metric("sentipolc_f1", _gold_pred_item, sentipolc_f1)
NER_F1 = Metric("ner_f1", _on_generation(ner_labels), ner_f1)
NER_F1_STRICT = Metric("ner_f1_strict", ner_pairs, _strict_micro_f1)
REL_F1 = Metric("rel_f1", _on_generation(rel_labels), rel_f1)
REL_F1_STRICT = Metric("rel_f1_strict", rel_pairs, _strict_micro_f1)
LS_F1 = Metric("ls_f1", _on_generation(ls_item), ls_f1)
ROUGE1, ROUGE2, ROUGE_L, ROUGE_LSUM = (rouge_metric(k) for k in ("rouge1", "rouge2", "rougeL", "rougeLsum"))
# The MC accuracies every multiple-choice task reports (lm-eval's acc and acc_norm, plus bytes).
MC_ACCURACIES = [ACC, ACC_NORM, ACC_BYTES]

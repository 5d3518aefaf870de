"""Corpus-level metrics computed from the per-sample records written to ``samples/*.jsonl``.

``score_samples(metric, samples)`` is the one entry point: the runner and the
bootstrap (issue 7) call it on the same sample dicts. Every score is a fraction in
[0, 1]. The lm-eval-compatible metrics (``f1_binary``, ``sentipolc_f1``,
``ner_f1``, ``rel_f1``, ``ls_f1``, ``rouge*``) reproduce
``lm_eval/tasks/evalita_llm/{utils,metrics}.py`` of lm-evaluation-harness 0.4.13,
quirks included (documented in docs/evaluator.md); the ``*_strict`` ones are
plain micro-F1 over multisets of pairs.

Sample fields: MC ``loglikelihoods``, ``choices``, ``prediction`` (argmax index),
``gold`` (index); generative ``generation`` and ``gold`` (NER: the entity dicts;
REL: the [RML, EVENT] pairs; LS: the {word, count} answers; SUM: the reference text).
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Sequence

from .answers import normalize
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


def _accuracy(norm: str | None) -> Callable[[Samples], float]:
    def score(samples: Samples) -> float:
        # Generated answers (eval/settings.py) carry their parsed "prediction", no log-likelihoods.
        return _mean([float((mc_prediction(s["loglikelihoods"], s["choices"], norm) if "loglikelihoods" in s else s["prediction"]) == s["gold"])
                      for s in samples])

    return score


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


def _concat_labels(samples: Samples, labeller: Callable[[str, list], tuple[list[int], list[int]]]) -> tuple[list[int], list[int]]:
    """(gold, predicted) labels of all samples, concatenated as lm-eval's aggregations do."""
    gold: list[int] = []
    pred: list[int] = []
    for s in samples:
        p, g = labeller(s["generation"], s["gold"])
        pred += p
        gold += g
    return gold, pred


def _gold_pred(samples: Samples) -> tuple[list[int], list[int]]:
    return [s["gold"] for s in samples], [s["prediction"] for s in samples]


def f1_macro(samples: Samples) -> float:
    return macro_f1(*_gold_pred(samples))


def f1_binary(samples: Samples) -> float:
    """lm-eval's ``f1`` aggregation (WiC, HS): sklearn's binary F1 of class 1."""
    gold, pred = _gold_pred(samples)
    return _class_f1(gold, pred, 1)


# SENTIPOLC classes -> (opos, oneg): positive, negative, neutral, mixed.
_SA_POLARITY = {0: (1, 0), 1: (0, 1), 2: (0, 0), 3: (1, 1)}


def sentipolc_f1(samples: Samples) -> float:
    """Mean over opos and oneg of the mean F1 of their classes 0 and 1 (lm-eval ``_aggreg_sa``)."""
    gold, pred = _gold_pred(samples)
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


def ner_f1(samples: Samples) -> float:
    """lm-eval ``_aggreg_ner``: per-label F1 over all labels, mean of all but the last (``O``) one."""
    f1 = per_label_f1(*_concat_labels(samples, ner_labels))
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


def ner_f1_strict(samples: Samples) -> float:
    pairs = []
    for s in samples:
        pred = [tuple(r) for r in parse_ner(s["generation"]) if isinstance(r, tuple)]
        pairs.append((pred, [(e["entity_text"], e["type"]) for e in s["gold"]]))
    return _strict_micro_f1(pairs)


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


def rel_f1(samples: Samples) -> float:
    """lm-eval ``_aggreg_rel``: sklearn macro F1 over the concatenated 0/1 labels."""
    return macro_f1(*_concat_labels(samples, rel_labels))


def rel_f1_strict(samples: Samples) -> float:
    pairs = []
    for s in samples:
        pred = [] if s["generation"] == "" else parse_rel(s["generation"])
        pairs.append((pred, [tuple(r) for r in s["gold"]]))
    return _strict_micro_f1(pairs)


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


def ls_f1(samples: Samples) -> float:
    """F1 of precision = credits / items answered and recall = credits / items with gold."""
    items = [ls_item(s["generation"], s["gold"]) for s in samples]
    credit = sum(i[0] for i in items)
    answered = sum(i[1] for i in items) or 1
    annotated = sum(i[2] for i in items) or 1
    prec, rec = credit / answered, credit / annotated
    return 2 * prec * rec / (prec + rec) if prec + rec else 0.0


# -- SUM ------------------------------------------------------------------------------
def _rouge(kind: str, reference: str = "gold", prepare: Callable[[str], str] = str) -> Callable[[Samples], float]:
    def score(samples: Samples) -> float:
        from rouge_score import rouge_scorer

        scorer = rouge_scorer.RougeScorer([kind], use_stemmer=False)
        return _mean([scorer.score(prepare(s[reference]), prepare(s["generation"]))[kind].fmeasure for s in samples])

    return score


METRICS: dict[str, Callable[[Samples], float]] = {
    "acc": _accuracy(None),
    "acc_norm": _accuracy("chars"),
    "acc_bytes": _accuracy("bytes"),
    "f1_macro": f1_macro,
    "f1_binary": f1_binary,
    "sentipolc_f1": sentipolc_f1,
    "ner_f1": ner_f1,
    "ner_f1_strict": ner_f1_strict,
    "rel_f1": rel_f1,
    "rel_f1_strict": rel_f1_strict,
    "ls_f1": ls_f1,
    "rouge1": _rouge("rouge1"),
    "rouge2": _rouge("rouge2"),
    "rougeL": _rouge("rougeL"),
    "rougeLsum": _rouge("rougeLsum"),
    # Open-ended answers of MC tasks (eval/settings.py): generation vs the gold answer text.
    # Accents folded first (answers.normalize): rouge-score's tokenizer drops non-ASCII letters ("Sì" -> "s").
    "rougeL_answer": _rouge("rougeL", "gold_answer", normalize),
}


def score_samples(metric: str, samples: list[dict]) -> float:
    """The corpus-level ``metric`` over ``samples`` (the dicts of samples/*.jsonl)."""
    try:
        fn = METRICS[metric]
    except KeyError:
        raise KeyError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}") from None
    return float(fn(samples))

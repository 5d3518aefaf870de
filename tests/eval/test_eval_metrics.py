"""Metrics on hand-computed cases, parsers on arbitrary text, and agreement with lm-eval's own code."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalita_data.scoring.metrics import ls_item, ner_labels, rel_labels
from evalita_eval.metrics import metric_of, score_samples
from evalita_data.scoring.parsers import parse_ls, parse_ner, parse_rel


def mc(lls, choices, gold):
    pred = max(range(len(lls)), key=lambda i: (lls[i], -i))
    return {"loglikelihoods": lls, "choices": choices, "gold": gold, "prediction": pred}


def test_accuracy_and_its_normalisations() -> None:
    # "Sì" is 2 characters and 3 bytes; "No" 2 and 2.
    s = mc([-3.0, -2.9], ["Sì", "No"], 0)
    assert score_samples("acc", [s]) == 0.0
    assert score_samples("acc_norm", [s]) == 0.0  # -1.5 vs -1.45
    assert score_samples("acc_bytes", [s]) == 1.0  # -1.0 vs -1.45
    long = mc([-10.0, -4.0], ["una risposta lunga", "No"], 0)
    assert score_samples("acc", [long]) == 0.0
    assert score_samples("acc_norm", [long]) == 1.0  # -10/18 > -4/2
    assert score_samples("acc", [s, long, mc([-1.0, -2.0], ["a", "b"], 0), mc([-1.0, -1.0], ["a", "b"], 0)]) == 0.5


def cls(gold, pred):
    return [{"gold": g, "prediction": p} for g, p in zip(gold, pred)]


def test_f1_macro_and_binary() -> None:
    samples = cls([1, 1, 0, 0, 0], [1, 0, 0, 0, 1])
    # class 1: tp 1, fp 1, fn 1 -> 0.5; class 0: tp 2, fp 1, fn 1 -> 4/6
    assert score_samples("f1_binary", samples) == pytest.approx(0.5)
    assert score_samples("f1_macro", samples) == pytest.approx((0.5 + 4 / 6) / 2)


def test_sentipolc_f1_by_hand() -> None:
    # gold: pos, neg, neutral, mixed; pred: pos, pos, neutral, neg
    samples = cls([0, 1, 2, 3], [0, 0, 2, 1])
    # opos gold 1,0,0,1 pred 1,1,0,0: class1 tp1 fp1 fn1 -> .5; class0 tp1 fp1 fn1 -> .5
    # oneg gold 0,1,0,1 pred 0,0,0,1: class1 tp1 fn1 -> 2/3; class0 tp2 fp1 -> 4/5
    assert score_samples("sentipolc_f1", samples) == pytest.approx((0.5 + (2 / 3 + 4 / 5) / 2) / 2)


def test_ner_scores_by_hand() -> None:
    gold = [{"entity_text": "Mario Rossi", "type": "PER"}, {"entity_text": "Roma", "type": "LOC"}]
    s1 = {"generation": "Mario Rossi$PER, Roma$ORG", "gold": gold}
    s2 = {"generation": "&&NOENT&&", "gold": []}
    assert ner_labels(s1["generation"], gold) == ([0, 3], [0, 1])
    assert ner_labels(s2["generation"], []) == ([3], [3])
    # labels gold [0,1,3] pred [0,3,3]: PER 1.0, LOC 0.0, O (dropped, last) -> mean of PER, LOC
    assert score_samples("ner_f1", [s1, s2]) == pytest.approx(0.5)
    # strict: 1 true positive, 2 predicted, 2 gold -> 2*1/4
    assert score_samples("ner_f1_strict", [s1, s2]) == pytest.approx(0.5)


def test_rel_scores_by_hand() -> None:
    s1 = {"generation": "110 mg/dl$glicemia%140/90$pressione%7$x", "gold": [["110 mg/dl", "glicemia"], ["140/90", "pressione"]]}
    s2 = {"generation": "&&NOREL&&", "gold": []}
    s3 = {"generation": "&&NOREL&&", "gold": [["12 g/dl", "Emoglobina"]]}
    assert rel_labels(s1["generation"], s1["gold"]) == ([1, 1], [1, 1])  # lm-eval checks results[0], matched
    assert rel_labels(s2["generation"], []) == ([0], [0])
    assert rel_labels(s3["generation"], s3["gold"]) == ([0], [1])
    # labels gold [1,1,0,1] pred [1,1,0,0]: class1 2*2/(4+1)=.8, class0 2/(2+1)=2/3
    assert score_samples("rel_f1", [s1, s2, s3]) == pytest.approx((0.8 + 2 / 3) / 2)
    # strict: tp 2, predicted 3, gold 3
    assert score_samples("rel_f1_strict", [s1, s2, s3]) == pytest.approx(4 / 6)


def test_ls_f1_by_hand() -> None:
    gold = [{"word": "capace", "count": 3}, {"word": "abile", "count": 1}]
    assert parse_ls('capace, "abile, bravo", esperto.\nseconda riga') == ["capace", "abile", "bravo", "esperto"]
    assert ls_item("capace, esperto", gold) == (0.75, 1, 1)
    samples = [{"generation": "capace, esperto", "gold": gold}, {"generation": "", "gold": gold}]
    # precision .75 / 1 answered; recall .75 / 2 annotated
    p, r = 0.75, 0.375
    assert score_samples("ls_f1", samples) == pytest.approx(2 * p * r / (p + r))


def test_rouge_is_mean_of_per_sample_f() -> None:
    samples = [{"generation": "il gatto dorme", "gold": "il gatto dorme sul divano"}, {"generation": "", "gold": "niente"}]
    # rouge1 of the first: p 1, r 3/5 -> 0.75; the second 0
    assert score_samples("rouge1", samples) == pytest.approx(0.375)


def test_unknown_metric_is_named() -> None:
    with pytest.raises(KeyError, match="unknown metric 'bleu': no registered task declares it"):
        score_samples("bleu", [])


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parsers_never_raise(text: str) -> None:
    assert isinstance(parse_ner(text), list)
    assert isinstance(parse_rel(text), list)
    assert len(parse_ls(text)) <= 10
    ner_labels(text, [{"entity_text": "Roma", "type": "LOC"}])
    rel_labels(text, [["a", "b"]])
    ls_item(text, [{"word": "a", "count": 1}])
    for metric in ("ner_f1", "ner_f1_strict"):
        score_samples(metric, [{"generation": text, "gold": []}])
    for metric in ("rel_f1", "rel_f1_strict"):
        score_samples(metric, [{"generation": text, "gold": [["a", "b"]]}])


# -- agreement with lm-eval's evalita_llm code on generated cases -----------------------
@lru_cache(maxsize=None)
def _lm_eval_module(name: str):
    spec_ = importlib.util.find_spec("lm_eval")
    if spec_ is None:
        pytest.skip("lm-evaluation-harness (lm-eval==0.4.13) is not installed")
    path = Path(spec_.origin).parent / "tasks" / "evalita_llm" / f"{name}.py"
    mod_spec = importlib.util.spec_from_file_location(f"_evalita_llm_{name}", path)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    return module


WORDS = st.sampled_from(["Roma", "Mario", "FIAT", "Milano", "12 g/dl", "glicemia", "x", ""])
TYPES = st.sampled_from(["PER", "LOC", "ORG"])
ENTS = st.lists(st.fixed_dictionaries({"entity_text": WORDS.filter(bool), "type": TYPES}), max_size=3)
PIECES = st.lists(st.tuples(WORDS, st.sampled_from(["PER", "LOC", "ORG", "per", "", "XX"])), max_size=4)


@st.composite
def ner_case(draw):
    gold = draw(ENTS)
    kind = draw(st.integers(0, 3))
    if kind == 0:
        gen = "&&NOENT&&"
    elif kind == 1:
        gen = draw(st.text(max_size=12))
    else:
        gen = ", ".join(f"{a}${b}" if b else a for a, b in draw(PIECES))
    return {"generation": gen, "gold": gold}


@st.composite
def rel_case(draw):
    gold = [list(p) for p in draw(st.lists(st.tuples(WORDS.filter(bool), WORDS.filter(bool)), max_size=3))]
    kind = draw(st.integers(0, 2))
    gen = "&&NOREL&&" if kind == 0 else draw(st.text(max_size=12)) if kind == 1 else "%".join(f"{a}${b}" for a, b in draw(st.lists(st.tuples(WORDS, WORDS), max_size=4)))
    return {"generation": gen, "gold": gold}


@st.composite
def ls_case(draw):
    words = draw(st.lists(st.sampled_from(["capace", "abile", "bravo", "esperto"]), min_size=1, max_size=3, unique=True))
    gold = [{"word": w, "count": draw(st.integers(1, 4))} for w in words]
    gen = draw(st.one_of(st.text(max_size=15), st.lists(st.sampled_from(["capace", " abile", "bravo.", '"esperto', "x"]), max_size=12).map(",".join)))
    return {"generation": gen, "gold": gold}


@settings(max_examples=150, deadline=None)
@given(st.lists(ner_case(), min_size=1, max_size=5), st.lists(rel_case(), min_size=1, max_size=5), st.lists(ls_case(), min_size=1, max_size=5))
def test_generative_metrics_equal_lm_eval(ner, rel, ls) -> None:
    utils, metrics = _lm_eval_module("utils"), _lm_eval_module("metrics")
    items = [utils.ner_process_results({"entities": s["gold"]}, [s["generation"]])["f1"] for s in ner]
    assert score_samples("ner_f1", ner) == pytest.approx(metrics._aggreg_ner(items), abs=1e-12)
    items = [utils.rel_process_results_v3({"relations": s["gold"]}, [s["generation"]])["f1"] for s in rel]
    assert score_samples("rel_f1", rel) == pytest.approx(metrics._aggreg_rel(items), abs=1e-12)
    items = [utils.ls_process_results({"answers": s["gold"]}, [s["generation"]])["f1"] for s in ls]
    assert score_samples("ls_f1", ls) == pytest.approx(metrics._aggreg_ls(items), abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=12), st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=1, max_size=12))
def test_classification_metrics_equal_lm_eval(sa, binary) -> None:
    import warnings

    from lm_eval.api.metrics import f1_score as lm_eval_f1
    from sklearn.metrics import f1_score

    metrics = _lm_eval_module("metrics")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # lm-eval's multiple-choice items are (gold, pred)
        assert score_samples("sentipolc_f1", cls(*zip(*sa))) == pytest.approx(metrics._aggreg_sa(sa), abs=1e-12)
        gold, pred = zip(*binary)
        assert score_samples("f1_binary", cls(gold, pred)) == pytest.approx(lm_eval_f1(binary), abs=1e-12)
        assert score_samples("f1_macro", cls(gold, pred)) == pytest.approx(f1_score(gold, pred, average="macro"), abs=1e-12)


def test_every_metric_is_found_through_its_task() -> None:
    from evalita_data.registry import TASKS

    for spec in TASKS.values():
        for entry, _config in spec.entries():
            assert [metric_of(entry, m.name) for m in spec.metrics] == spec.metrics, entry
    with pytest.raises(KeyError, match="task te declares no metric 'ner_f1'; it declares acc, acc_norm, acc_bytes"):
        metric_of("te", "ner_f1")

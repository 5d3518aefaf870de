"""The console summary of `evalita-eval run` (eval/running/console.py): every score with its n, the chance and
majority baselines beside it, and 'not a measurement' below MIN_ITEMS items."""

from __future__ import annotations

from evalita_eval.reporting.worth import MIN_ITEMS
from evalita_eval.running.console import summary_table, task_summary_table


def test_task_summary_shows_n_baselines_and_the_minimum() -> None:
    results = {
        "wic": {p: {"f1_macro": v, "acc": v, "n": 2} for p, v in (("p1", 0.0), ("p2", 1.0))},
        "faq": {"p1": {"acc": 0.5, "n": MIN_ITEMS}, "p2": {"acc": 0.25, "n": MIN_ITEMS}},
        "ner_adg": {"p1": {"ner_f1": 0.5, "n": 40}},
    }
    baselines = {"wic": {"n": 2, "chance": {"f1_macro": 0.4373}, "majority": {"f1_macro": 1.0}},
                 "faq": {"n": 30, "chance": {"acc": 0.25}, "majority": {"acc": 0.3}},
                 "ner_adg": {"n": 40, "chance": "n/a (generative task)", "majority": "n/a (generative task)"}}
    # wic: AvgP 50, MaxP 100, CPS (1 - (1 - 0.5)) * 1 = 50; faq: AvgP 37.5, MaxP 50, CPS (1 - 0.125) * 0.5 = 43.75
    assert task_summary_table(results, baselines).splitlines() == [
        "task     metric     n  prompts  AvgP %  MaxP %  CPS %  chance %  majority %",
        "wic      f1_macro   2        2   50.00  100.00  50.00     43.73      100.00  not a measurement: fewer than 30 items",
        "faq      acc       30        2   37.50   50.00  43.75     25.00       30.00",
        "ner_adg  ner_f1    40        1   50.00   50.00  50.00       n/a         n/a",
    ]
    # without baselines (an older caller): a dash, never a number
    assert task_summary_table({"faq": results["faq"]}).splitlines()[1].endswith("–" + " " * 11 + "–")


def test_prompt_table_carries_n() -> None:
    text = summary_table({"te": {"p1": {"acc": 0.5, "n": 4}, "p2": {"acc": 0.25, "unparsed": 1, "n": 4}}})
    assert text.splitlines() == ["task  prompt  n  metrics", "te    p1      4  acc=50.00", "te    p2      4  acc=25.00  unparsed=1/4 (!)",
                                 "(!): 10 % or more of the prompt's answers could not be read (unparsed, scored as wrong); the score rests on the others"]

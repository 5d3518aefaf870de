"""Reports and compare read what a run recorded about its tasks (results.json task_versions:
version, prompt hashes, metrics with kind and direction), not the registry installed now."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from paths import TEST_DATA

from evalita_eval.reporting.compare import CHANGED_PROMPT, compare_runs
from evalita_eval.record import read_run
from evalita_eval.record import RecordError
from evalita_eval.reporting.task_report import build_task_report

RESULTS = TEST_DATA / "results"
PROMPTS = {f"p{i}": f"{i:012x}" for i in range(1, 7)}


def metric(name: str, kind: str = "hits", higher: bool = True) -> dict:
    return {"name": name, "kind": kind, "higher_is_better": higher}


def copy_run(name: str, tmp_path: Path, te_record: dict | None) -> Path:
    """A fixture run (tests/data/results) whose results.json records ``te_record`` for te."""
    folder = tmp_path / name
    shutil.copytree(RESULTS / name, folder)
    doc = json.loads((folder / "results.json").read_text("utf-8"))
    if te_record is not None:
        doc["task_versions"] = {"te": te_record}
    for prompt, scores in doc["results"]["te"].items():  # a second metric, from log-likelihoods: acc_norm = gold 1's share
        path = folder / "samples" / f"te_{prompt}.jsonl"
        lines = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
        # argmax: the prediction (acc as before); per character, always the second, longer choice
        lines = [{**s, "choices": ["a", "b" * 10], "loglikelihoods": [-1.0, -2.0][:: 1 - 2 * s["prediction"]]} for s in lines]
        path.write_text("".join(json.dumps(s) + "\n" for s in lines), "utf-8")
        scores["acc_norm"] = sum(s["gold"] == 1 for s in lines) / len(lines)
    (folder / "results.json").write_text(json.dumps(doc), "utf-8")
    return folder


def te_record(version: int = 1, prompts: dict | None = None, metrics: list | None = None) -> dict:
    return {"version": version, "prompts": dict(prompts or PROMPTS), "metrics": metrics or [metric("acc"), metric("acc_norm")]}


def test_the_report_shows_the_headline_the_run_recorded_not_the_installed_one(tmp_path: Path) -> None:
    # te declares acc first today; this run recorded acc_norm as its headline: the report shows acc_norm.
    run = read_run(copy_run("alpha", tmp_path, te_record(metrics=[metric("acc_norm"), metric("acc")])) / "results.json")
    rep = build_task_report("te", [run])
    assert rep.metric == "acc_norm" and rep.higher_is_better is True
    gold = [json.loads(line)["gold"] for line in (RESULTS / "alpha" / "samples" / "te_p1.jsonl").read_text("utf-8").splitlines()]
    assert rep.table.model_scores(run.display) == pytest.approx([100 * gold.count(1) / len(gold)] * 6)  # not acc's
    # A file written before the record: the installed declaration (acc), as before.
    old = read_run(copy_run("alpha", tmp_path / "old", None) / "results.json")
    assert build_task_report("te", [old]).metric == "acc"


def test_a_recorded_lower_is_better_direction_reaches_the_ranking(tmp_path: Path) -> None:
    run = read_run(copy_run("alpha", tmp_path, te_record(metrics=[metric("acc", "hits", False)])) / "results.json")
    assert build_task_report("te", [run]).higher_is_better is False


def test_compare_does_not_test_a_prompt_whose_definition_differs(tmp_path: Path) -> None:
    edited = {**PROMPTS, "p2": "ffffffffffff"}
    a = copy_run("alpha", tmp_path, te_record())
    b = copy_run("beta", tmp_path, te_record(version=2, prompts=edited))
    rows, notes = compare_runs(a, b, k=50, seed=0)
    te = {r.prompt: r for r in rows if r.task == "te"}
    assert te["p2"].test == "not tested" and te["p2"].p_value is None and te["p2"].detail == CHANGED_PROMPT
    assert te["p1"].test == "mcnemar" and te["p1"].detail == "b=15 c=9"  # the unchanged prompts are still tested
    assert te["AvgP"].test == "not tested" and te["AvgP"].detail == f"p2: {CHANGED_PROMPT}"
    assert any("te: the runs were made with different versions of the task (A: 1, B: 2)" in n for n in notes)
    assert any("te: prompt(s) p2 differ between the runs" in n for n in notes)


def test_a_recorded_kind_decides_the_test(tmp_path: Path) -> None:
    # acc recorded as a corpus metric by both runs: a paired bootstrap, not McNemar.
    rec = te_record(metrics=[metric("acc", "corpus")])
    rows, _ = compare_runs(copy_run("alpha", tmp_path, rec), copy_run("beta", tmp_path, rec), k=50, seed=0)
    p1 = next(r for r in rows if (r.task, r.prompt) == ("te", "p1"))
    assert p1.test == "paired bootstrap (k=50, seed 0)" and p1.difference == pytest.approx(0.10)


def test_runs_that_recorded_one_metric_differently_are_an_error(tmp_path: Path) -> None:
    a = copy_run("alpha", tmp_path, te_record(metrics=[metric("acc", "hits")]))
    b = copy_run("beta", tmp_path, te_record(metrics=[metric("acc", "corpus")]))
    with pytest.raises(RecordError, match="te: metric 'acc' was recorded differently by the runs"):
        compare_runs(a, b, k=10, seed=0)


@pytest.mark.parametrize("bad, where", [
    ({"version": 1, "prompts": PROMPTS, "metrics": [{"name": "acc", "kind": "best", "higher_is_better": True}]},
     "key task_versions.te.metrics.0.kind: 'best' is not one of ['hits', 'corpus']"),
    ({"version": 1, "prompts": PROMPTS, "metrics": "acc"}, "key task_versions.te.metrics: 'acc' is not of type 'array'"),
    ({"version": 1, "prompts": PROMPTS, "metrics": []}, "key task_versions.te.metrics: [] should be non-empty"),
    ({"version": 1, "prompts": ["p1"]}, "key task_versions.te.prompts: ['p1'] is not of type 'object'"),
])
def test_a_malformed_record_is_an_error_naming_the_file_and_key(tmp_path: Path, bad: dict, where: str) -> None:
    folder = copy_run("alpha", tmp_path, bad)
    with pytest.raises(RecordError, match=re.escape(f"{folder / 'results.json'}: {where}")):
        build_task_report("te", [read_run(folder / "results.json")])

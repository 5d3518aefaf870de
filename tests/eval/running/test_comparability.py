"""comparable_with_paper (record/comparable.py, one function of the record for writer and readers): false, with every reason, for any run that is not the
paper's whole evaluation split with its prompts and budgets; the reasons shown wherever the flag is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalita_eval.record import parse_record
from evalita_eval.record.build import config_record
from evalita_eval.record.model import DataRecord, ModelRecord, RunRecord
from evalita_eval.record import comparability_text
from evalita_eval.running.results_file import config_json, task_versions
from evalita_eval.run_config import RunSpec
from evalita_eval.sources.entries import select_entries

from paths import TEST_DATA

TE_NER = select_entries(["te", "ner_adg"])


def not_comparable_reasons(config: RunSpec, entries) -> list[str]:
    """The reasons the runner writes for a run of ``config`` over ``entries``: the record it builds, asked."""
    identity = {"prompts": sorted(config.prompts) if config.prompts is not None else None}
    record = RunRecord(path=Path("results.json"), status="complete", run_id=None, identity=None, model=ModelRecord("m"),
                       config=config_record(config_json(config, None, 1), identity), data=DataRecord(),
                       results={e.name: {} for e in entries},
                       task_versions={e.name: task_versions(e, config.setting) for e in entries})
    assert record.to_json()["not_comparable_with_paper"] == record.not_comparable_reasons  # what it writes
    return record.not_comparable_reasons


def test_the_papers_evaluation_is_comparable() -> None:
    assert not_comparable_reasons(RunSpec(model="m", data="data"), TE_NER) == []
    # every prompt named, and the task's own budget: still the paper's evaluation
    same = RunSpec(model="m", data="data", prompts=["p1", "p2", "p3", "p4", "p5", "p6"], max_new_tokens=256)
    assert not_comparable_reasons(same, TE_NER) == []
    # a budget override on log-likelihood tasks only changes nothing
    assert not_comparable_reasons(RunSpec(model="m", data="data", max_new_tokens=32), select_entries(["te"])) == []


@pytest.mark.parametrize("config, reasons", [
    (RunSpec(model="m", data="data", limit=2), ["--limit 2: only the first 2 items of each task"]),
    (RunSpec(model="m", data="data", limit=10_000), ["--limit 10000: only the first 10000 items of each task"]),
    (RunSpec(model="m", data="data", split="dev"), ["--split dev: not the tasks' evaluation split"]),
    (RunSpec(model="m", data="data", max_new_tokens=32), ["--max-new-tokens 32: the paper's budget is ner_adg 256"]),
    (RunSpec(model="m", data="data", prompts=["p1"]), ["--prompts p1: leaves out ner_adg p2, te p2, te p3, te p4, te p5, te p6"]),
    # the quickstart's run: both reasons, in this order
    (RunSpec(model="m", data="data", limit=2, max_new_tokens=32), ["--limit 2: only the first 2 items of each task",
                                              "--max-new-tokens 32: the paper's budget is ner_adg 256"]),
])
def test_each_departure_is_a_reason(config: RunSpec, reasons: list[str]) -> None:
    assert not_comparable_reasons(config, TE_NER) == reasons


def test_instruct_settings_have_their_own_prompts_and_budgets() -> None:
    te = select_entries(["te"])
    assert not_comparable_reasons(RunSpec(model="m", data="data", setting="ce", prompts=["p1", "p2"], max_new_tokens=16), te) == []
    assert not_comparable_reasons(RunSpec(model="m", data="data", setting="ce", prompts=["p1"], max_new_tokens=32), te) == [
        "--max-new-tokens 32: the paper's budget is te 16", "--prompts p1: leaves out te p2"]


def reasons_read(doc: dict) -> tuple[list[str], list[str]]:
    """The reasons and notes of a results.json as the record's reader derives them."""
    record = parse_record(Path("results.json"), {"model": {"name_or_path": "m"}, "results": {"te": {"p1": {"acc": 1.0, "n": 1}}}, **doc})
    return record.not_comparable_reasons, record.notes


def test_reasons_are_derived_from_the_recorded_config_never_from_the_flag() -> None:
    assert reasons_read({"not_comparable_with_paper": ["x"], "config": {"limit": 2}}) == (["--limit 2: only the first 2 items of each task"], [])
    # a flag its config contradicts: the config's answer, and one note
    flipped = "results.json says comparable_with_paper: {}, but its recorded config says {}: the value recomputed from the config is shown"
    assert reasons_read({"config": {"limit": 2, "split": None, "max_new_tokens": None}, "comparable_with_paper": True}) == (
        ["--limit 2: only the first 2 items of each task"], [flipped.format("true", "no")])
    assert reasons_read({"config": {}, "comparable_with_paper": False}) == ([], [flipped.format("false", "yes")])
    assert reasons_read({"config": {"limit": None}, "comparable_with_paper": True}) == ([], [])
    # an older file (no budgets recorded): any --max-new-tokens is a reason
    assert reasons_read({"config": {"max_new_tokens": 8}}) == (["--max-new-tokens 8: the generation budget was changed"], [])
    assert comparability_text([]) == "yes" and comparability_text(["a", "b"]) == "no: a; b"


def test_a_limited_run_says_so_in_results_report_and_card(tmp_path: Path, tiny_model: Path) -> None:
    """The real CLI: --limit recorded with its reason, and the reason in the report's Markdown, HTML and the card."""
    from click.testing import CliRunner

    from evalita_eval.cli import main

    data = TEST_DATA / "build"
    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(data), "--tasks", "te", "--prompts", "p1,p2",
                                    "--limit", "3", "--output-dir", str(out), "--no-progress"])
    assert res.exit_code == 0, res.output
    doc = json.loads((out / "results.json").read_text("utf-8"))
    reasons = ["--limit 3: only the first 3 items of each task", "--prompts p1,p2: leaves out te p3, te p4, te p5, te p6"]
    assert doc["comparable_with_paper"] is False and doc["not_comparable_with_paper"] == reasons
    rep = CliRunner().invoke(main, ["report", str(out / "results.json"), "--out", str(tmp_path / "rep"), "--bootstrap", "0"])
    assert rep.exit_code == 0, rep.output
    md = (tmp_path / "rep" / "report.md").read_text("utf-8")
    html = (tmp_path / "rep" / "report.html").read_text("utf-8")
    assert any(line.startswith("> note: tiny") and line.endswith(f": not comparable with the paper: {'; '.join(reasons)}")
               for line in md.splitlines()), md
    assert f"| no: {'; '.join(reasons)} |" in md  # the models table's "comparable with the paper" column
    assert f"not comparable with the paper: {'; '.join(reasons)}" in html
    from evalita_eval.publishing.push_results import results_repo

    card = next(f for f in results_repo(out, "me/results", echo=lambda _m: None).files if f.path.endswith("/README.md")).data.decode("utf-8")  # the run's own card
    assert "(not comparable with the paper)\n" in card
    assert f"| comparable with the paper | no: {'; '.join(reasons)} |" in card
    assert f"Note: not comparable with the paper: {'; '.join(reasons)}" in card
    assert "| te | acc | 3 |" in card and "Note: te: n=3, not a measurement: fewer than 30 items" in card
    from evalita_eval.reporting.compare import compare_runs

    rows, notes = compare_runs(out, out, k=20, seed=0)
    assert [(r.prompt, r.n) for r in rows] == [("p1", 3), ("p2", 3), ("AvgP", 3)]
    assert notes == [f"A: not comparable with the paper: {'; '.join(reasons)}", f"B: not comparable with the paper: {'; '.join(reasons)}",
                     "not a measurement: fewer than 30 items: te p1, te p2, te AvgP"]

"""evalita-eval aggregate: scores files of any harness -> the paper's tables."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from evalita_eval.cli import main

from paths import TEST_DATA

TABLE14 = TEST_DATA / "scores" / "paper_table14_te.csv"


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def row(text: str, label: str) -> list[str]:
    """Cells of the Markdown row whose first cell is ``label``."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == label:
            return cells[1:]
    raise AssertionError(f"no row {label!r} in:\n{text}")


def test_aggregate_reproduces_paper_table14(tmp_path):
    res = run("aggregate", str(TABLE14), "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    text = (tmp_path / "aggregate.md").read_text(encoding="utf-8")
    assert text in res.output
    # per prompt: six scores, then MinP MaxP AvgP CPS
    assert row(text, "p1")[6:] == ["45.25", "75.50", "62.08", "65.37"]
    assert row(text, "p4")[6:] == ["55.00", "74.75", "63.54", "66.37"]
    # per model: LLM-1 and LLM-5 columns
    assert [row(text, k)[0] for k in ("MaxP", "AvgP", "CPS")] == ["70.25", "59.33", "62.58"]
    assert [row(text, k)[4] for k in ("MaxP", "AvgP", "CPS")] == ["78.75", "70.08", "71.93"]
    assert row(text, "prompt")[:6] == [f"LLM-{i}" for i in range(1, 7)]
    data = json.loads((tmp_path / "aggregate.json").read_text())
    assert data["scale"] == 100.0
    assert data["tasks"]["te"]["per_model"]["LLM-5"]["MaxP"] == 78.75
    assert data["tasks"]["te"]["per_prompt"]["p1"]["MinP"] == 45.25


def test_aggregate_keeps_fraction_scale(tmp_path):
    rows = [{"model": m, "task": "t", "prompt": p, "score": s}
            for m, scores in (("a", (0.5, 0.7)), ("b", (0.6, 0.6))) for p, s in zip(("p1", "p2"), scores)]
    src = tmp_path / "scores.json"
    src.write_text(json.dumps(rows))
    res = run("aggregate", str(src), "--out", str(tmp_path / "out"))
    assert res.exit_code == 0, res.output
    # model a: max 0.7, avg 0.6, sat 0.9, cps 0.63; Sharpe 0.6 / 1.1
    assert [row(res.output, k)[0] for k in ("MaxP", "AvgP", "CPS")] == ["0.7000", "0.6000", "0.6300"]
    assert row(res.output, "Sharpe (α=1)")[:2] == ["0.5455", "0.6000"]
    assert "fractions" in res.output


def test_aggregate_flag_overrides_detection(tmp_path):
    src = tmp_path / "s.csv"
    src.write_text("model,task,prompt,score,extra\nm,t,p1,0.5,x\nm,t,p2,1.0,y\n")
    res = run("aggregate", str(src), "--scale", "percent", "--out", str(tmp_path / "o"))
    assert res.exit_code == 0, res.output
    assert row(res.output, "p1")[:1] == ["0.50"]  # read as 0.5 %, printed with 2 decimals (one model: its score alone)


@pytest.mark.parametrize("content, message", [
    ("model,task,score\nm,t,1\n", "lacks column(s) ['prompt']"),
    ("model,task,prompt,score\nm,t,p1,abc\n", "s.csv:2: score 'abc' is not a number"),
    ("model,task,prompt,score\nm,t,p1,0.5\nm,t,p1,0.6\n", "s.csv:3: second score for model 'm'"),
    ("model,task,prompt,score\na,t,p1,0.5\na,t,p2,0.6\nb,t,p1,0.4\n", "no score for model/prompt b/p2"),
    ("model,task,prompt,score\na,t,p1,50\na,t,p2,101\n", "s.csv:3: score 101.0 is outside [0, 100]"),
    ("model,task,prompt,score\n", "no score rows"),
])
def test_aggregate_errors_name_the_problem(tmp_path, content, message):
    src = tmp_path / "s.csv"
    src.write_text(content)
    res = run("aggregate", str(src), "--out", str(tmp_path / "o"))
    assert res.exit_code == 1
    assert message in res.output


def test_aggregate_fraction_flag_rejects_percent(tmp_path):
    res = run("aggregate", str(TABLE14), "--scale", "fraction", "--out", str(tmp_path))
    assert res.exit_code == 1 and "outside [0, 1] (fraction scale)" in res.output

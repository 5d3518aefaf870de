"""LS: SemEval-2007 style XML joined with gold lines (fixtures in that format)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from evalita_data.converters.ls import parse_substitutes
from evalita_data.errors import MissingSource, SourceError
from evalita_data.building.pipeline import build
from evalita_data.building.conversion_report import ConversionReport

from paths import SAMPLES
from constructed import by_split, read_split, run_converter

LS_DIR = SAMPLES / "ls"


def test_exact_records_and_reported_gaps(tmp_path: Path) -> None:
    out = tmp_path / "build"
    build(SAMPLES, out, ["ls"], progress=False)
    dev, test = read_split(out, "ls", "dev"), read_split(out, "ls", "test")
    assert [r["id"] for r in dev] == ["1", "2"] and [r["id"] for r in test] == ["101", "102", "103"]
    assert dev[0] == {
        "id": "1",
        "context": "Il governo e' arrivato a un <head>accordo</head> con i sindacati dopo una lunga trattativa .",
        "head": "accordo", "lexelt": "accordo.n", "lexelt_lemma": "accordo",
        "answers": [{"word": "intesa", "count": 3}, {"word": "compromesso", "count": 2}, {"word": "patto", "count": 2}],
    }
    # ISO-8859-1 XML (declared) is decoded; a multi-word substitute is kept; a repeated one is summed.
    assert test[0]["context"] == "Un vento <head>forte</head> ha soffiato per tutta la notte sulla città ."
    assert test[2]["answers"] == [{"word": "prestare", "count": 3}, {"word": "dare una mano", "count": 1}, {"word": "porgere", "count": 1}]
    report = json.loads((out / "manifest.json").read_text())["tasks"]["ls"]["report"]
    assert report["dropped"] == {
        "gold line without an instance in the XML": 1,
        "instance whose gold line lists no substitute": 1,
        "instance without a gold line": 1,
    }
    assert report["examples"]["dropped: instance without a gold line"] == ["trial/lexsub_trial.xml lexelt=lasciare.v id=4"]
    assert report["examples"]["dropped: gold line without an instance in the XML"] == ["trial/gold.trial:4 (lasciare.v 99)"]
    assert report["repaired"] == {"substitute listed twice on one gold line: counts summed": 1}
    assert report["notes"]["dev: instances in trial/lexsub_trial.xml"] == 4


def test_indented_context_is_trimmed(tmp_path: Path) -> None:
    task_dir = _copy(tmp_path)
    (task_dir / "trial/gold.trial").write_text("lasciare.v 3 :: abbandonare 2;chiudere 1;\n", "utf-8")
    pairs, report = run_converter("ls", task_dir, 0)
    dev = by_split(pairs)["dev"]
    assert [r["id"] for r in dev] == ["3"]
    assert dev[0]["context"] == "Non <head>lasciare</head> la porta aperta quando esci ."
    assert report.dropped["instance without a gold line"] == 3


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(alphabet="abcèò ", min_size=1, max_size=6).filter(lambda w: w.strip() == w and w),
                          st.integers(min_value=1, max_value=9)), min_size=1, max_size=8))
def test_answers_sorted_and_counts_summed(subs: list[tuple[str, int]]) -> None:
    line = ";".join(f"{w} {c}" for w, c in subs) + ";"
    answers = parse_substitutes(line, "gold", 1, ConversionReport())
    totals: dict[str, int] = {}
    for w, c in subs:
        totals[w] = totals.get(w, 0) + c
    assert {a["word"]: a["count"] for a in answers} == totals
    assert answers == sorted(answers, key=lambda a: (-a["count"], a["word"]))


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(LS_DIR, tmp_path / "ls")
    return tmp_path / "ls"


@pytest.mark.parametrize("gold, message", [
    ("accordo.n 1 :: intesa tre;\n", r"gold.trial:1: substitute 'intesa' has count 'tre'; expected a positive integer"),
    ("accordo.n 1 :: intesa 0;\n", r"gold.trial:1: substitute 'intesa' has count '0'"),
    ("accordo.n 1 :: intesa;\n", r"gold.trial:1: substitute 'intesa' has no count"),
    ("accordo.n 1 intesa 2;\n", r"gold.trial:1: expected 'lemma.pos id :: substitute count"),
    ("accordo.n 1 :: intesa 2;\naccordo.n 1 :: patto 1;\n", r"gold.trial:2: second gold line for accordo.n 1 \(first on line 1\)"),
])
def test_bad_gold(tmp_path: Path, gold: str, message: str) -> None:
    task_dir = _copy(tmp_path)
    (task_dir / "trial/gold.trial").write_text(gold, "utf-8")
    with pytest.raises(SourceError, match=message):
        run_converter("ls", task_dir, 0)


@pytest.mark.parametrize("old, new, message", [
    ("un <head>accordo</head> con", "un <head>accordo</head> <head>patto</head> con", r"expected exactly one <head>"),
    ("<head>accordo</head> commerciale", "accordo commerciale", r"instance id=2\]: <context> holds \[\]"),
    ('<instance id="2">', '<instance id="1">', r"instance id 1 also under lexelt accordo.n"),
    ('<lexelt item="lasciare.v">', '<lexelt item="lasciare">', r"expected an item attribute 'lemma.pos'"),
    ("</corpus>", "", r"malformed XML"),
])
def test_bad_xml(tmp_path: Path, old: str, new: str, message: str) -> None:
    task_dir = _copy(tmp_path)
    xml = task_dir / "trial/lexsub_trial.xml"
    xml.write_text(xml.read_text("utf-8").replace(old, new, 1), "utf-8")
    with pytest.raises(SourceError, match=message):
        run_converter("ls", task_dir, 0)


def test_missing_files(tmp_path: Path) -> None:
    task_dir = _copy(tmp_path)
    (task_dir / "test/gold.test").unlink()
    pairs, report = run_converter("ls", task_dir, 0)
    assert set(by_split(pairs)) == {"dev"}
    assert report.missing[0].splits == ["test"] and "test/gold.test" in report.missing[0].files
    shutil.rmtree(task_dir / "trial")
    (task_dir / "test/lexsub_test.xml").unlink()
    with pytest.raises(MissingSource):
        run_converter("ls", task_dir, 0)

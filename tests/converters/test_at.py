"""AT: admission-test workbooks (fixtures in the layout of raw/at/README.md)."""

from __future__ import annotations

import datetime as dt
import json
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from evalita_data.converters import at
from evalita_data.errors import MissingSource, SourceError
from evalita_data.building.pipeline import build

from at_workbooks import EN_HEADER, IT_HEADER, question_rows, write_workbook
from paths import SAMPLES
from constructed import by_split, letters_balanced, options_distinct, read_split, run_converter

AT_DIR = SAMPLES / "at"
EXCLUDED = ["2017-4", "2017-9", "2017-17", "2018-6"]


def original_options(qid: str) -> list[str]:
    """The options of a fixture question as the sheet lists them (correct first)."""
    year, n = qid.split("-")
    row = question_rows(int(year), int(n))[-1]
    return [str(v) for v in row[2:7]]


def test_counts_exclusions_and_exact_record(tmp_path: Path) -> None:
    out = tmp_path / "build"
    build(SAMPLES, out, ["at"], progress=False)
    dev, test = read_split(out, "at", "dev"), read_split(out, "at", "test")
    assert (len(dev), len(test)) == (21, 60)  # 85 rows - 4 excluded = 81 usable
    rec = next(r for r in test if r["Id"] == "2017-12")
    assert rec == {
        "Id": "2017-12", "Question": "Quesito 12 dell'anno 2017: quale affermazione è corretta?",
        "A": "Distrattore tre 12", "B": "0.5", "C": "Risposta corretta 2017/12", "D": "Distrattore quattro 12",
        "E": "Distrattore due 12", "Correct": "C",
    }
    repaired = next(r for r in dev if r["Id"] == "2017-20")
    assert repaired["Question"] == "Quale farmaco\nè indicato?"
    report = json.loads((out / "manifest.json").read_text())["tasks"]["at"]["report"]
    assert [e["Id"] for e in report["notes"]["excluded questions"]] == EXCLUDED
    reasons = {e["Id"]: e["reason"] for e in report["notes"]["excluded questions"]}
    assert reasons["2017-4"] == "needs an image (image column: 'sì')"
    assert reasons["2017-9"] == "question refers to an image ('immagine')"
    assert reasons["2018-6"] == "two options with the same text"
    assert report["dropped"] == {"question needs an image": 3, "two options with the same text": 1}
    assert report["notes"]["usable questions by year"] == {"2017": 27, "2018": 29, "2019": 25}
    assert report["notes"]["questions in no split"] == []


@lru_cache(maxsize=1)
def reference_splits() -> dict[str, list[str]]:
    return {s: [r["Id"] for r in rs] for s, rs in by_split(run_converter("at", AT_DIR, 1234)[0]).items()}


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32))
def test_invariants_over_seeds(seed: int) -> None:
    pairs, report = run_converter("at", AT_DIR, seed)
    splits = by_split(pairs)
    # The splits never depend on the seed.
    assert {s: [r["Id"] for r in rs] for s, rs in splits.items()} == reference_splits()
    for split, recs in splits.items():
        assert letters_balanced(recs, "Correct", "ABCDE"), split
        assert report.notes["correct letter counts"][split] == {
            letter: sum(r["Correct"] == letter for r in recs) for letter in "ABCDE"}
        for rec in recs:
            options = original_options(rec["Id"])
            if rec["Id"] != "2017-12":  # its number cell becomes the text "0.5"
                assert rec[rec["Correct"]] == options[0]
                assert sorted(rec[k] for k in "ABCDE") == sorted(options)
            assert options_distinct(rec, "ABCDE")
            assert rec["Id"] not in EXCLUDED


def test_deterministic_and_seed_changes_only_letters(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for out, seed in ((a, None), (b, None), (c, 99)):
        build(SAMPLES, out, ["at"], seed=seed, progress=False)
    for split in ("dev", "test"):
        assert (a / "at" / f"{split}.jsonl").read_bytes() == (b / "at" / f"{split}.jsonl").read_bytes()
        one, other = read_split(a, "at", split), read_split(c, "at", split)
        assert [(r["Id"], r["Question"], r[r["Correct"]]) for r in one] == \
               [(r["Id"], r["Question"], r[r["Correct"]]) for r in other]
        assert [r["Correct"] for r in one] != [r["Correct"] for r in other]


def test_questions_beyond_the_cap_are_reported(monkeypatch) -> None:
    monkeypatch.setattr(at, "TEST_CAP", 50)
    pairs, report = run_converter("at", AT_DIR, 1)
    splits = by_split(pairs)
    assert (len(splits["dev"]), len(splits["test"])) == (21, 50)
    unplaced = report.notes["questions in no split"]
    assert len(unplaced) == 10 and report.dropped["beyond the 50-question test cap (not drawn)"] == 10
    placed = {r["Id"] for rs in splits.values() for r in rs}
    assert not placed & set(unplaced) and len(placed | set(unplaced)) == 81


def test_small_workbook_split_rule(tmp_path: Path) -> None:
    write_workbook(tmp_path / "at" / "prova_2022.xlsx", {"Foglio1": [IT_HEADER, *question_rows(2022, 9)]})
    splits = by_split(run_converter("at", tmp_path / "at", 1)[0])
    assert (len(splits["dev"]), len(splits["test"])) == (4, 5)  # dev = N // 2 below 42 questions


def test_no_workbook_is_missing_source(tmp_path: Path) -> None:
    (tmp_path / "at").mkdir()
    with pytest.raises(MissingSource):
        run_converter("at", tmp_path / "at", 1)


def _one_sheet(tmp_path: Path, rows: list[list[object]], name: str = "SSM_2020.xlsx", title: str = "Foglio1") -> Path:
    write_workbook(tmp_path / "at" / name, {title: rows})
    return tmp_path / "at"


@pytest.mark.parametrize("make, message", [
    (lambda p: _one_sheet(p, [IT_HEADER[:6] + IT_HEADER[7:], *[r[:6] + r[7:] for r in question_rows(2020, 3)]]),
     r"missing column\(s\): option 5 \(wrong\)"),
    (lambda p: _one_sheet(p, [["Domanda", "Risposta corretta", "Risposta errata 1", "Risposta errata 2", "Risposta errata 3"]]),
     r"missing column\(s\): option 5 \(wrong\)"),
    (lambda p: _one_sheet(p, [IT_HEADER + ["Commento"], *question_rows(2020, 3)]), r"cell I1\]: unknown column 'Commento'"),
    (lambda p: _one_sheet(p, [IT_HEADER[:3] + ["Risposta 1"] + IT_HEADER[4:], *question_rows(2020, 3)]),
     r"same role as column 'Risposta 1'"),
    (lambda p: _one_sheet(p, [IT_HEADER, *question_rows(2020, 3)], name="esame.xlsx"), r"no single exam year"),
    (lambda p: _one_sheet(p, [IT_HEADER, *question_rows(2020, 3)], title="2019"), r"sheet name says 2019 but file name says 2020"),
    (lambda p: _one_sheet(p, [IT_HEADER, *question_rows(2020, 2), [3, "Domanda?", "a", "b", None, "d", "e"]]),
     r"row 4\]: empty wrong answer 2"),
    (lambda p: _one_sheet(p, [IT_HEADER, *question_rows(2020, 2), [3, "Domanda?", dt.datetime(2020, 1, 1), "b", "c", "d", "e"]]),
     r"cell C4\]: cell holds"),
    (lambda p: _one_sheet(p, [IT_HEADER, *question_rows(2020, 2), [2, "Domanda?", "a", "b", "c", "d", "e"]]),
     r"question number 2 already on row 3"),
    (lambda p: _one_sheet(p, [IT_HEADER, *question_rows(2020, 2), [None, None, None, None, None, None, None, None, "x"]]),
     r"cell I4\]: value 'x' in a column without a header"),
])
def test_bad_workbooks(tmp_path: Path, make, message) -> None:
    task_dir = make(tmp_path)
    with pytest.raises(SourceError, match=message):
        run_converter("at", task_dir, 1)


def test_same_year_twice_and_other_formats(tmp_path: Path) -> None:
    task_dir = tmp_path / "at"
    write_workbook(task_dir / "a.xlsx", {"2018": [EN_HEADER, *question_rows(2018, 3, with_image_column=False)]})
    write_workbook(task_dir / "b_2018.xlsx", {"Foglio1": [IT_HEADER, *question_rows(2018, 3)]})
    with pytest.raises(SourceError, match=r"year 2018 already read from a.xlsx \[2018\]"):
        run_converter("at", task_dir, 1)
    (task_dir / "b_2018.xlsx").unlink()
    (task_dir / "old_2016.xls").write_bytes(b"\xd0\xcf\x11\xe0")
    with pytest.raises(SourceError, match=r"old_2016.xls: not an .xlsx workbook"):
        run_converter("at", task_dir, 1)
    (task_dir / "old_2016.xls").unlink()
    (task_dir / "~$a.xlsx").write_bytes(b"lock")  # Excel's lock file of an open workbook: skipped
    pairs, report = run_converter("at", task_dir, 1)
    assert len(pairs) == 3 and "skipped Excel lock file ~$a.xlsx" in report.notes
    (task_dir / "broken_2016.xlsx").write_bytes(b"not a zip")
    with pytest.raises(SourceError, match=r"broken_2016.xlsx: cannot open as an Excel .xlsx workbook"):
        run_converter("at", task_dir, 1)


def test_workbooks_are_read_without_formulas_or_macros(tmp_path: Path) -> None:
    # A formula cell never computed by Excel has no cached value: it reads as empty, never evaluated.
    rows = [IT_HEADER, *question_rows(2021, 2), [3, "Quanto fa 2+2?", "=2+2", "3", "5", "6", "22"]]
    task_dir = _one_sheet(tmp_path, rows, name="SSM_2021.xlsx")
    with pytest.raises(SourceError, match=r"row 4\]: empty correct answer"):
        run_converter("at", task_dir, 1)


def test_fixture_files_match_their_generator(tmp_path: Path) -> None:
    from at_workbooks import write_fixtures
    from openpyxl import load_workbook

    for fresh in write_fixtures(tmp_path):
        committed = load_workbook(AT_DIR / fresh.name, read_only=True)
        regenerated = load_workbook(fresh, read_only=True)
        assert [ws.title for ws in committed.worksheets] == [ws.title for ws in regenerated.worksheets]
        for a_ws, b_ws in zip(committed.worksheets, regenerated.worksheets):
            assert list(a_ws.iter_rows(values_only=True)) == list(b_ws.iter_rows(values_only=True))
        committed.close()
        regenerated.close()

"""The validator's semantic checks of the constructed tasks (beyond JSON Schema)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from evalita_data.cli import main
from evalita_data.jsonl import write_jsonl
from evalita_data.schema_check import record_problems

FAQ = {"id": "1", "question": "Q?", "correct_answer": "B", "A": "uno", "B": "due", "C": "tre", "D": "quattro"}
AT = {"Id": "2017-1", "Question": "Q?", "A": "a", "B": "b", "C": "c", "D": "d", "E": "e", "Correct": "E"}
LS = {"id": "1", "context": "un <head>forte</head> vento", "head": "forte", "lexelt": "forte.a", "lexelt_lemma": "forte",
      "answers": [{"word": "intenso", "count": 2}, {"word": "violento", "count": 2}, {"word": "impetuoso", "count": 1}]}


def test_valid_records_pass() -> None:
    assert record_problems("faq", FAQ) == []
    assert record_problems("at", AT) == []
    assert record_problems("ls", LS) == []
    assert record_problems("sum", {"source": "Articolo.", "target": "Sintesi."}) == []


def test_equal_options_after_normalisation() -> None:
    assert record_problems("faq", {**FAQ, "D": "  DUE "}) == ["D: same text as option B (after whitespace/case normalisation)"]
    assert record_problems("at", {**AT, "C": "A"}) == ["C: same text as option A (after whitespace/case normalisation)"]


def test_schema_rejects_bad_letters_and_counts() -> None:
    assert record_problems("faq", {**FAQ, "correct_answer": "E"}) == ["correct_answer: 'E' is not one of ['A', 'B', 'C', 'D']"]
    assert any(p.startswith("answers.0.count") for p in record_problems("ls", {**LS, "answers": [{"word": "x", "count": 0}]}))
    assert any(p.startswith("(record)") for p in record_problems("sum", {"source": "a", "target": "b", "extra": 1}))


def test_ls_semantic_checks() -> None:
    assert record_problems("ls", {**LS, "head": "debole"}) == ["head: 'debole' differs from the marked word 'forte' in context"]
    assert record_problems("ls", {**LS, "answers": list(reversed(LS["answers"]))}) == [
        "answers: not sorted by count (descending), then word"]
    assert record_problems("ls", {**LS, "context": "<head>un</head> <head>forte</head>"}) == [
        "context: 2 <head>..</head> spans; expected exactly one"]
    assert record_problems("ls", {**LS, "lexelt_lemma": "fort"}) == ["lexelt_lemma: 'fort' is not the lemma of lexelt 'forte.a'"]
    dup = [{"word": "x", "count": 1}, {"word": "x", "count": 1}]
    assert record_problems("ls", {**LS, "answers": dup}) == ["answers: a word is listed twice"]


def test_validate_command_reports_the_line(tmp_path: Path) -> None:
    (tmp_path / "faq").mkdir()
    write_jsonl(tmp_path / "faq" / "test.jsonl", [FAQ, {**FAQ, "id": "2", "C": "Uno"}])
    result = CliRunner().invoke(main, ["validate", str(tmp_path)])
    assert result.exit_code == 1
    assert "faq/test.jsonl:2: C: same text as option A (after whitespace/case normalisation)" in result.output

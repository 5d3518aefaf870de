"""The check that a CLI failure is one clear line, shared by the data side's and the evaluator's
integrity tests (tests/data_side/test_integrity.py, tests/eval/test_integrity_eval.py)."""

from __future__ import annotations

from click.testing import Result


def assert_one_clear_line(result: Result, *fragments: str) -> str:
    """Exit != 0, no traceback, and the first error line names what went wrong."""
    assert result.exit_code != 0, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith(("error:", "Error:"))]
    assert lines, result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]

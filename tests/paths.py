"""Where the tests' material lies, for a test file at any depth of tests/ (tests/eval/running/...):
test files name these instead of a path relative to their own ``__file__``."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent  # tests/: the shared helpers, extra_tasks/, lm_eval_reference.py
ROOT = TESTS.parent  # the repository: README.md, pyproject.toml, scripts/, docs/, raw/
TEST_DATA = TESTS / "data"  # the committed fixtures
SAMPLES = TEST_DATA / "raw"  # the committed excerpts of the original raw files

"""An added task's declaration alone gives it what the built-in ones have (issue 20): the
``capitals_yesno`` task of tests/extra_tasks/ (registered through EVALITA_TASK_PATH) declares
an answer format (``output_pattern``) and its own metric (``yesno_match``); nothing in
evalita_data or eval names it. It gets constrained generations in that format (hf backend,
xgrammar), unparsed counts in results.json, bootstrap CIs of its metric in the report, and
byte-identical cards over two builds."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_data import registry
from evalita_data.registry import ENV_VAR

from paths import TESTS

HERE = TESTS
EXTRA = HERE / "extra_tasks"
TASK = "capitals_yesno"
FORMAT = "Sì|No"


@pytest.fixture(scope="module")
def added(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory):
    """The registry with tests/extra_tasks, and a build of its raw file; the tiny model is
    made first, from the built-in tasks only (its tokenizer is trained on their prompts)."""
    from evalita_data.building.pipeline import build

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_VAR, str(EXTRA))
        registry.reload()
        out = tmp_path_factory.mktemp("added") / "build"
        build(EXTRA / "raw", out, tasks=["capitals", "capitals_gen", TASK], progress=False)
        yield out
    registry.reload()


def _eval(args: list[str], expect: int = 0) -> str:
    from evalita_eval.cli import main

    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == expect, result.output
    return result.output


def _samples(out: Path, prompt: str) -> list[dict]:
    return [json.loads(x) for x in (out / "samples" / f"{TASK}_{prompt}.jsonl").read_text("utf-8").splitlines()]


def test_the_declaration_is_the_one_of_the_spec(added: Path) -> None:
    spec = registry.get_task(TASK)
    assert (spec.output_pattern, spec.output_closings, spec.metric_names()) == (FORMAT, ("Sì", "No"), ["yesno_match"])


def test_constrained_generations_match_the_declared_format(added: Path, tiny_model: Path, tmp_path: Path) -> None:
    pytest.importorskip("xgrammar")
    free, constrained = tmp_path / "free", tmp_path / "constrained"
    common = ["run", "--model", str(tiny_model), "--data", str(added), "--tasks", TASK, "--backend", "hf", "--no-progress"]
    _eval([*common, "--output-dir", str(free)])
    _eval([*common, "--constrained", "--output-dir", str(constrained)])
    for out, is_constrained in ((free, False), (constrained, True)):
        doc = json.loads((out / "results.json").read_text("utf-8"))
        assert doc.get("task_config") == ({TASK: {"constrained": True}} if is_constrained else None)
        for prompt in ("p1", "p2"):
            gens = [s["generation"] for s in _samples(out, prompt)]
            scores = doc["results"][TASK][prompt]
            assert scores["n"] == len(gens) == 2
            # The unparsed count is the number of answers outside the declared format.
            assert scores["unparsed"] == sum(re.fullmatch(FORMAT, g) is None for g in gens)
            if is_constrained:
                assert scores["unparsed"] == 0 and all(g in ("Sì", "No") for g in gens), gens
    free_doc = json.loads((free / "results.json").read_text("utf-8"))
    assert sum(p["unparsed"] for p in free_doc["results"][TASK].values()) > 0  # a random model does not say Sì/No by itself

    # The report recomputes the task's own metric from the samples: bootstrap CIs, no omission.
    from evalita_eval.reporting.report import write_report

    write_report([constrained / "results.json", free / "results.json"], tmp_path / "rep", k=20, seed=1)
    md = (tmp_path / "rep" / "report.md").read_text("utf-8")
    assert "bootstrap omitted" not in md and "bootstrap CIs omitted" not in md
    tables = json.loads((tmp_path / "rep" / "report.json").read_text("utf-8"))["tasks"]
    ours = [t for name, t in tables.items() if name.split(" [")[0] == TASK]
    assert len(ours) == 2  # the free and the constrained run, one table per setting
    for table in ours:
        assert table["metric"] == "yesno_match" and table["rank_basis"] == "bootstrap of AvgP (k=20)"
        assert sorted(key.rsplit("/", 1)[1] for key in table["bootstrap"]) == ["p1", "p2"]


def test_constrained_refuses_a_named_task_without_format(added: Path, tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "refused"
    output = _eval(["run", "--model", str(tiny_model), "--data", str(added), "--tasks", f"{TASK},capitals_gen", "--constrained",
                    "--no-progress", "--output-dir", str(out)], expect=1)
    assert "--constrained: capitals_gen declare(s) no answer format (TaskSpec.output_pattern)" in output
    assert not out.exists()  # refused before any work


def test_a_run_over_every_task_records_which_ones_were_constrained(added: Path, tiny_model: Path, tmp_path: Path) -> None:
    """Over every task (skip_missing), a task without format is generated free, with a warning and a true record."""
    pytest.importorskip("xgrammar")
    from evalita_eval.api import BackendOptions
    from evalita_eval.backends import create_backend
    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.run_config import RunSpec
    from evalita_eval.sources.entries import select_entries
    from evalita_eval.sources.folder import FolderSource

    backend = create_backend("hf", BackendOptions(str(tiny_model), dtype="float32", threads=1))
    said: list[str] = []
    runner = Runner(backend, ModelInfo(str(tiny_model), None, backend.dtype, "hf"), FolderSource(added),
                    RunSpec(model="m", data="data", limit=2, progress=False, constrained=True), tmp_path, echo=said.append)
    runner.run(select_entries(["capitals", "capitals_gen", TASK]))
    doc = json.loads((tmp_path / "results.json").read_text("utf-8"))
    assert doc["config"]["constrained"] is True
    # MC scored by log-likelihood generates nothing; capitals_gen has no format; capitals_yesno is constrained.
    assert doc["task_config"] == {"capitals": {"constrained": False}, "capitals_gen": {"constrained": False}, TASK: {"constrained": True}}
    assert said[0] == "warning: capitals_gen: generated without constraint, the task declares no answer format (TaskSpec.output_pattern)"
    assert "unparsed" not in doc["results"]["capitals_gen"]["p1"]


def test_two_builds_give_byte_identical_cards(added: Path, tmp_path: Path) -> None:
    from evalita_data.building.pipeline import build

    # The same raw files from another folder, built into another one: the cards must not differ.
    raw = tmp_path / "elsewhere" / "raw"
    shutil.copytree(EXTRA / "raw", raw)
    build(raw, tmp_path / "build", tasks=["capitals", "capitals_gen", TASK], progress=False)
    for task in ("capitals", "capitals_gen", TASK):
        first, second = (added / task / "README.md").read_bytes(), (tmp_path / "build" / task / "README.md").read_bytes()
        assert first == second, task
        assert b"converter `capitals_convert:convert`" in first and b" at 0x" not in first

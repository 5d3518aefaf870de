"""The run is one plan, built once: the plan that is printed is the one the runner executes (its
requests are not built again), and its counts are those of the run."""

from __future__ import annotations

import json
from pathlib import Path

from evalita_eval.api import BackendOptions
from evalita_eval.backends import create_backend
from evalita_eval.running.runner import ModelInfo, Runner
from evalita_eval.run_config import RunSpec
from evalita_eval.sources.entries import select_entries
from evalita_eval.sources.folder import FolderSource

from paths import TEST_DATA

DATA = TEST_DATA / "build"


def _runner(model: Path, out: Path) -> Runner:
    backend = create_backend("hf", BackendOptions(str(model), dtype="float32", batch_size=4))
    config = RunSpec(model="m", data="data", limit=2, prompts=["p1", "p2"], progress=False)
    return Runner(backend, ModelInfo(str(model), None, "float32", "hf"), FolderSource(str(DATA)), config, out)


def test_the_runner_executes_the_plan_it_was_given(tiny_model: Path, tmp_path: Path, monkeypatch) -> None:
    entries = select_entries(["te", "ner_fic"])
    planned = _runner(tiny_model, tmp_path / "planned")
    plan = planned.plan(entries)
    # te: 2 documents x 2 prompts x 2 choices (log-likelihoods); ner_fic: 2 documents x 2 prompts (generations).
    work = {p.name: (p.kind, p.requests, p.cached) for p in plan.work(None)}
    assert work == {"te": ("loglikelihood", 8, 0), "ner_fic": ("generate_until", 4, 0)}
    # What the time estimate prices: te's two one-token choices of a context share one forward row (characters / 4).
    te = plan.work(None)[0]
    assert {len(r.continuation) for p in plan.entries["te"].prompts for r in p.requests} == {3}  # " Sì", " No": one token each
    assert (te.rows, te.row_tokens) == (4, sum(-(-len(c) // 4) for p in plan.entries["te"].prompts for c in p.contexts))

    def refuse(*args, **kwargs):
        raise AssertionError("the plan's documents were loaded again")

    monkeypatch.setattr(planned, "load_docs", refuse)
    monkeypatch.setattr(planned, "prompt_requests", refuse)
    result = planned.run(plan)
    assert (result.requests, result.computed, result.cached) == (12, 12, 0)
    monkeypatch.undo()
    # The same run from its entries (the plan built inside run) gives the same numbers, byte for byte.
    direct = _runner(tiny_model, tmp_path / "direct").run(entries)
    assert direct.record.results == result.record.results
    for name in ("te_p1", "te_p2", "ner_fic_p1", "ner_fic_p2"):
        assert ((tmp_path / "planned" / "samples" / f"{name}.jsonl").read_bytes()
                == (tmp_path / "direct" / "samples" / f"{name}.jsonl").read_bytes())
    # A rerun's plan knows what the cache holds: every request, none left to compute.
    again = _runner(tiny_model, tmp_path / "planned").plan(entries)
    assert [(p.cached, p.left_tokens, p.rows) for p in again.work(None)] == [(8, 0, 0), (4, 0, 0)]
    assert json.loads((tmp_path / "planned" / "results.json").read_text("utf-8"))["status"] == "complete"

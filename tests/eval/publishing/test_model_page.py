"""Model-page files (eval/publishing/model_page.py) that the Hub reads: ``.eval_results/*.yaml`` and ``model-index``
parsed by huggingface_hub's own parsers, every task_id a task of the benchmark's eval.yaml, dataset config and
split the official ones, the model named by its id."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard, parse_eval_result_entries
from huggingface_hub.repocard_data import model_index_to_eval_results

from evalita_eval.publishing.model_page import BENCHMARK_TASK_IDS, benchmark_task_id, official_location

from paths import TEST_DATA
from publish_fixtures import repo_folder

RUN = TEST_DATA / "results" / "beta"
OFFICIAL = {"evalitahf/textual_entailment": "c0ffee", "evalitahf/hatespeech_detection": "beef01", "evalitahf/entity_recognition": "d00d02"}
RUN_DAY = 1_780_000_000  # 2026-05-28 (UTC)


def _official_run(tmp: Path) -> Path:
    """The beta run as read from the official Hub datasets, its NER results those of the ADG domain."""
    run = tmp / "run"
    shutil.copytree(RUN, run)
    doc = json.loads((run / "results.json").read_text("utf-8"))
    doc["data"] = {"source": "hf:evalitahf", "manifest_sha256": doc["data"]["manifest_sha256"], "revisions": OFFICIAL}
    doc["results"]["ner_adg"] = doc["results"].pop("ner")
    (run / "results.json").write_text(json.dumps(doc), "utf-8")
    os.utime(run / "results.json", (RUN_DAY, RUN_DAY))
    return run


def test_the_official_locations_and_task_ids() -> None:
    assert [official_location(t) for t in ("te", "hs", "faq", "ner_adg", "ner_wn", "sum")] == [
        ("default", "test"), ("default", "test_all"), ("default", "test_1"), ("adg", "reduced_test"), ("wn", "reduced_test"),
        ("default", "test_100")]
    assert [benchmark_task_id(t) for t in BENCHMARK_TASK_IDS] == list(BENCHMARK_TASK_IDS)
    # the benchmark's entries are the entries whose eval.yaml ids `evalita-data push` writes (the CPS id is the entry's name)
    from evalita_data.hub.benchmark import entry_task_ids
    from evalita_data.registry import task_ids

    assert sorted(BENCHMARK_TASK_IDS) == sorted(e for t in task_ids() for e in entry_task_ids(t))
    with pytest.raises(ValueError, match=r"^task 'ner' is no task of the Evalita-LLM benchmark \(wic, te, "):
        benchmark_task_id("ner")


def test_eval_results_and_model_index_parse_with_huggingface_hub(tmp_path: Path) -> None:
    run = _official_run(tmp_path)
    out = tmp_path / "repo"
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "push-results", str(run), "--repo", "me/results",
                           "--to-dir", str(out)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr
    folder = repo_folder(run)
    entries = parse_eval_result_entries(yaml.safe_load((out / folder / ".eval_results" / f"evalita-llm_{folder.split('/')[1]}.yaml")
                                                       .read_text("utf-8")))
    assert [(e.dataset_id, e.task_id, e.dataset_revision, e.date) for e in entries] == [
        ("evalitahf/textual_entailment", "te", "c0ffee", "2026-05-28"), ("evalitahf/hatespeech_detection", "hs", "beef01", "2026-05-28"),
        ("evalitahf/entity_recognition", "ner_adg", "d00d02", "2026-05-28")]
    assert all(e.task_id in BENCHMARK_TASK_IDS for e in entries)
    # ... and each one an id of the eval.yaml that `evalita-data push` writes in the task's dataset (evalita_data/hub/benchmark.py)
    from evalita_data.hub.benchmark import entry_task_ids
    from evalita_data.registry import task_of_entry

    assert all(e.task_id in entry_task_ids(task_of_entry(e.task_id).id)[e.task_id] for e in entries)
    assert entries[0].value == 62.11  # te acc of beta: MaxP 65.00, AvgP 60.556 -> (1 - (65.00 - 60.556) / 100) * 65.00
    assert entries[0].notes.endswith("complete run on the official split (default/test), evaluated 2026-05-28 (evalita-eval)")
    # model-index: pasted in a card's YAML header, read back by huggingface_hub's card parser
    header = (out / folder / "model-index.yaml").read_text("utf-8")
    card = ModelCard(f"---\n{header}---\n# card\n")
    name, results = model_index_to_eval_results(card.data.to_dict()["model-index"])
    assert name == "org-b/beta-8b"  # the model's id, no @revision
    cps = [(r.dataset_type, r.dataset_config, r.dataset_split, r.dataset_revision, r.metric_type, r.metric_value)
           for r in results if r.metric_type == "cps"]
    assert cps == [("evalitahf/textual_entailment", "default", "test", "c0ffee", "cps", 62.11),
                   ("evalitahf/hatespeech_detection", "default", "test_all", "beef01", "cps", entries[1].value),
                   ("evalitahf/entity_recognition", "adg", "reduced_test", "d00d02", "cps", entries[2].value)]
    per_prompt = [(r.dataset_type, r.metric_type, r.metric_name) for r in results if r.metric_type != "cps"]
    assert per_prompt[0] == ("evalitahf/textual_entailment", "accuracy", "acc p1") and len(per_prompt) == 6 + 6 + 2
    assert {r.metric_type for r in results} == {"cps", "accuracy", "f1"}
    assert all(r.dataset_config and r.dataset_split for r in results)

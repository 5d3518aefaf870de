"""End to end: `evalita-eval run` on the tiny local model, every task and prompt; resume after kill -9."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_data.registry import TASKS
from evalita_eval.cli import main
from evalita_eval.sources.entries import all_entries

from paths import TESTS

HERE = TESTS
DATA = HERE / "data" / "build"
SAMPLE_KEYS_MC = {"doc_id", "prompt", "choices", "loglikelihoods", "prediction", "gold"}
SAMPLE_KEYS_GEN = {"doc_id", "prompt", "generation", "prediction", "gold"}


def _run(args: list[str]) -> str:
    result = CliRunner().invoke(main, ["run", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.smoke
def test_run_every_task_and_prompt(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "res"
    console = _run(["--model", str(tiny_model), "--data", str(DATA), "--limit", "2", "--max-new-tokens", "8", "--output-dir", str(out)])
    doc = json.loads((out / "results.json").read_text("utf-8"))
    assert set(doc) == {"format_version", "status", "tasks", "model", "data", "config", "comparable_with_paper", "not_comparable_with_paper", "results",
                        "parsed_by", "unparsed_flags", "baselines", "skipped", "versions", "timing", "resources", "run_identity", "run_id",
                        "task_versions", "asked"}
    # how each task was asked (EEE's generation_config): scored choices, or generation with its budget and stops
    assert (doc["asked"]["te"], doc["asked"]["ls"]) == ({"request": "loglikelihood"},
                                                        {"request": "generate_until", "max_new_tokens": 8, "until": ["</s>"]})
    assert doc["comparable_with_paper"] is False and doc["not_comparable_with_paper"][0] == "--limit 2: only the first 2 items of each task"
    assert doc["skipped"] == {}
    assert doc["status"] == "complete"
    model = doc["model"]
    assert {k: model[k] for k in ("name_or_path", "revision", "dtype", "backend")} == {"name_or_path": str(tiny_model), "revision": None, "dtype": "float32", "backend": "hf"}
    assert model["name"] == f"{tiny_model.name}-{model['files_sha256'][:8]}"  # no --model-name: folder and weights hash
    assert len(model["cache_key"]) == 64 and len(model["files_sha256"]) == 64  # the identity: tests/eval/backend_support/test_cache_identity.py
    from transformers import AutoModelForCausalLM

    assert model["num_parameters"] == sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(tiny_model).parameters())
    assert doc["config"]["limit"] == 2 and doc["config"]["num_fewshot"] == 0 and doc["config"]["seed"] == 1234
    names = [e.name for e in all_entries()]
    assert list(doc["results"]) == names == [name for spec in TASKS.values() for name, _config in spec.entries()]
    assert {"ner_adg", "ner_fic", "ner_wn"} <= set(names)
    assert set(doc["timing"]) == set(names)
    assert doc["data"]["manifest_sha256"]["ner_fic"]["test"] == __import__("hashlib").sha256((DATA / "ner/fic/test.jsonl").read_bytes()).hexdigest()
    for entry in all_entries():
        spec = TASKS[entry.task_id]
        assert sorted(doc["results"][entry.name]) == [p.name for p in spec.prompts]
        for prompt, scores in doc["results"][entry.name].items():
            assert scores["n"] == 2
            formatted = spec.output_pattern is not None  # NER/REL/LS count answers outside their format
            assert set(scores) == set(spec.metric_names()) | {"n"} | ({"unparsed"} if formatted else set())
            assert all(0.0 <= v <= 1.0 for m, v in scores.items() if m not in ("n", "unparsed"))
            lines = (out / "samples" / f"{entry.name}_{prompt}.jsonl").read_text("utf-8").splitlines()
            samples = [json.loads(x) for x in lines]
            if formatted:
                assert scores["unparsed"] == sum(re.fullmatch(spec.output_pattern, s["generation"]) is None for s in samples)
            assert [s["doc_id"] for s in samples] == [0, 1]
            keys = SAMPLE_KEYS_MC if spec.output_type == "multiple_choice" else SAMPLE_KEYS_GEN
            assert all(keys <= set(s) for s in samples)
            assert samples[0]["prompt"] == entry.compiled.render(prompt, json.loads((DATA / entry.task_id / (entry.config or "") / f"{spec.eval_split}.jsonl").read_text("utf-8").splitlines()[0]))
    # the summary table names every entry
    for name in names:
        assert f"\n{name} " in console
    # a rerun reads everything from the cache
    again = _run(["--model", str(tiny_model), "--data", str(DATA), "--limit", "2", "--max-new-tokens", "8", "--output-dir", str(out)])
    assert "\n0 requests computed" in again
    assert json.loads((out / "results.json").read_text("utf-8"))["results"] == doc["results"]


def test_fewshot_chat_template(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "chat"
    _run(["--model", str(tiny_model), "--data", str(DATA), "--tasks", "te,ner_wn", "--prompts", "p1", "--limit", "1",
          "--num-fewshot", "2", "--apply-chat-template", "--max-new-tokens", "4", "--output-dir", str(out)])
    [te] = [json.loads(x) for x in (out / "samples" / "te_p1.jsonl").read_text("utf-8").splitlines()]
    # two user/assistant example turns, then the question as the last user turn
    assert te["prompt"].startswith("<s><|user|>\nLa frase:")
    assert te["prompt"].count("<|assistant|>\n") == 3 and te["prompt"].count("</s>") == 2
    assert te["prompt"].endswith("<|assistant|>\n")
    doc = json.loads((out / "results.json").read_text("utf-8"))
    assert doc["config"]["apply_chat_template"] is True and doc["config"]["num_fewshot"] == 2
    assert set(doc["data"]["manifest_sha256"]["ner_wn"]) == {"test", "trial"}


def test_run_on_pipeline_build(tiny_model: Path, tmp_path: Path) -> None:
    """The splits built from tests/data/raw by the real pipeline, with few-shot examples.

    The samples have no HS test_all and no REL test: a run over all tasks skips them.
    """
    from evalita_data.building.pipeline import build

    build(HERE / "data" / "raw", tmp_path / "build", progress=False)
    out = tmp_path / "res"
    console = _run(["--model", str(tiny_model), "--data", str(tmp_path / "build"), "--limit", "2", "--num-fewshot", "1",
                    "--max-new-tokens", "4", "--output-dir", str(out)])
    assert "hs: skipped" in console and "rel: skipped" in console
    doc = json.loads((out / "results.json").read_text("utf-8"))
    assert list(doc["results"]) == [e.name for e in all_entries() if e.task_id not in ("hs", "rel")]
    assert {p: s["n"] for p, s in doc["results"]["sa"].items()} == {f"p{i}": 2 for i in range(1, 7)}
    assert set(doc["results"]["wic"]["p1"]) == {"f1_macro", "f1_binary", "acc", "acc_norm", "acc_bytes", "n"}
    assert set(doc["data"]["manifest_sha256"]["ner_wn"]) == {"test", "trial"}


def test_missing_split_is_a_clear_error(tiny_model: Path, tmp_path: Path) -> None:
    (tmp_path / "build" / "te").mkdir(parents=True)
    result = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(tmp_path / "build"), "--tasks", "te", "--output-dir", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert "Error: te: no split 'test'" in result.output


def test_no_chat_template_is_a_clear_error(tiny_model: Path, tmp_path: Path) -> None:
    from evalita_eval.api import BackendOptions
    from evalita_eval.backends import create_backend

    backend = create_backend("hf", BackendOptions(str(tiny_model)))
    backend.tokenizer.chat_template = None
    with pytest.raises(ValueError, match="has no chat template; run without --apply-chat-template"):
        backend.apply_chat_template([{"role": "user", "content": "ciao"}])


def test_unknown_task_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--model", "x", "--data", str(DATA), "--tasks", "tee"])
    assert result.exit_code == 2 and "unknown task 'tee'" in result.output


def _cache_lines(path: Path) -> int:
    if not path.is_file():
        return 0
    return sum(1 for line in path.read_text("utf-8").splitlines() if line.endswith("}"))


def test_resume_after_kill(tiny_model: Path, tmp_path: Path) -> None:
    args = ["--model", str(tiny_model), "--data", str(DATA), "--tasks", "te,faq,ner_adg", "--limit", "3",
            "--batch-size", "1", "--max-new-tokens", "16"]
    cmd = [sys.executable, "-m", "evalita_eval.cli", "run", *args]
    out = tmp_path / "killed"
    proc = subprocess.Popen([*cmd, "--output-dir", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cache = out / "cache.jsonl"
    while proc.poll() is None and _cache_lines(cache) < 24:
        time.sleep(0.01)  # poll without taking a core from the run
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = _cache_lines(cache)
    assert not (out / "results.json").exists() or "ner_adg" not in json.loads((out / "results.json").read_text())["results"]

    resumed = subprocess.run([*cmd, "--output-dir", str(out)], capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # te 6x3x2 + faq 6x3x4 log-likelihoods (some shared across prompts) + ner 2x3 generations
    total = _cache_lines(cache)
    computed = int(resumed.stdout.split(" requests computed")[0].rsplit("\n", 1)[-1])
    assert computed == total - done > 0

    fresh = _run([*args, "--output-dir", str(tmp_path / "fresh")])
    assert int(fresh.split(" requests computed")[0].rsplit("\n", 1)[-1]) == total
    got = json.loads((out / "results.json").read_text())["results"]
    want = json.loads((tmp_path / "fresh" / "results.json").read_text())["results"]
    assert got == want
    names = sorted(p.name for p in (tmp_path / "fresh" / "samples").iterdir())
    assert len(names) == sum(len(TASKS[t].prompts) for t in ("te", "faq", "ner")) and "ner_adg_p2.jsonl" in names
    for name in names:  # the run is one stream (running/stream.py): every task's samples, as an uninterrupted run's
        assert (out / "samples" / name).read_bytes() == (tmp_path / "fresh" / "samples" / name).read_bytes()


def test_missing_evaluator_extra_is_an_install_hint(monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name, *a))
    result = CliRunner().invoke(main, ["run", "--model", "x", "--data", "."])
    assert result.exit_code == 1
    assert "needs transformers" in result.output and "pip install torch -e '.[eval]'" in result.output

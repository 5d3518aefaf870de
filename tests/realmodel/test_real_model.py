"""A real pretrained instruct model (SmolLM2-135M-Instruct, conftest.py) through the evaluator:
every evaluable task x every prompt on ``hf``, the instruct settings with and without constrained
decoding (parse rates), and the GGUF file against its float32 conversion through the CLI."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engines.engine_helpers import DATA, assert_same_run, run_in_process
from evalita_data.registry import TASKS
from evalita_eval.sources.entries import all_entries

# Small enough for a few minutes on 2 CPU cores, large enough for every prompt to see several items.
LIMIT = 2
MAX_NEW_TOKENS = 24
# Two paths over the same weights on this model (a GGUF file vs its float32 conversion): float32
# rounding of 576-wide batched matrix products (other batch shapes, other summation orders)
# moves log-likelihoods by up to about 1.4e-4, a third of lm-eval's own batch-1 vs batch-8
# difference on a 512-wide model (bench/README.md). A scoring bug moves them by far more.
def real_close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-5 * abs(a) + 1e-4


MC_TASKS = sorted(t for t, s in TASKS.items() if s.output_type == "multiple_choice")
PARSE_RATES = Path(os.environ.get("EVALITA_REAL_MODEL_REPORT", "")) if os.environ.get("EVALITA_REAL_MODEL_REPORT") else None


def _backend(name: str, loaded: Any) -> Any:
    from evalita_eval.backends.hf import HFBackend

    assert name == "hf"
    return HFBackend(loaded.model, loaded.tokenizer, max_length=loaded.max_length, name_or_path=loaded.name_or_path)


@pytest.fixture(scope="module")
def hf_run(real_loaded: Any, real_plain: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("real-hf")
    run_in_process(_backend("hf", real_loaded), "hf", real_plain, out, limit=LIMIT, max_new_tokens=MAX_NEW_TOKENS)
    return out


def test_every_task_and_prompt_runs_on_hf(hf_run: Path) -> None:
    """Every task entry x every prompt on a real model's 49k vocabulary and real prompts: each
    prompt's score rests on LIMIT items, and every multiple-choice item has a log-likelihood per choice."""
    doc = json.loads((hf_run / "results.json").read_text("utf-8"))
    assert list(doc["results"]) == [e.name for e in all_entries()]
    for entry in all_entries():
        assert sorted(doc["results"][entry.name]) == [p.name for p in TASKS[entry.task_id].prompts], entry.name
        assert all(scores["n"] == LIMIT for scores in doc["results"][entry.name].values()), entry.name
        if entry.spec.output_type == "multiple_choice":
            for p in entry.spec.prompts:
                samples = [json.loads(x) for x in (hf_run / "samples" / f"{entry.name}_{p.name}.jsonl").read_text("utf-8").splitlines()]
                assert [len(s["loglikelihoods"]) for s in samples] == [len(entry.compiled.choices(p.name, d)) for d in _docs(entry)[:LIMIT]]


def _docs(entry: Any) -> list[dict]:
    path = DATA / entry.task_id / (entry.config or "") / f"{entry.spec.eval_split}.jsonl"
    return [json.loads(x) for x in path.read_text("utf-8").splitlines()]


@pytest.mark.parametrize("constrained", [False, True], ids=["free", "constrained"])
def test_instruct_setting_parse_rates(real_loaded: Any, real_plain: Path, tmp_path: Path, constrained: bool) -> None:
    """``--setting ce --apply-chat-template`` on every MC task: with constrained decoding every answer
    is one of the choices; without, the parse rate is what the model gives (recorded, printed)."""
    pytest.importorskip("xgrammar")
    doc = run_in_process(_backend("hf", real_loaded), "hf", real_plain, tmp_path, tasks=MC_TASKS, limit=LIMIT,
                         setting="ce", constrained=constrained, apply_chat_template=True)
    rates = {}
    for task in MC_TASKS:
        assert sorted(doc["results"][task]) == ["p1", "p2"], task
        for prompt, scores in doc["results"][task].items():
            samples = [json.loads(x) for x in (tmp_path / "samples" / f"{task}_{prompt}.jsonl").read_text("utf-8").splitlines()]
            assert scores["n"] == len(samples) == LIMIT
            parsed = sum(s["parsed"] is not None for s in samples)
            assert scores["unparsed"] == len(samples) - parsed, (task, prompt)
            if constrained:
                assert parsed == len(samples) and all(s["generation"] == s["choices"][s["parsed"]] for s in samples), (task, prompt)
            rates[f"{task}_{prompt}"] = parsed / len(samples)
    total = sum(rates.values()) / len(rates)
    print(f"ce {'constrained' if constrained else 'free'}: parse rate {total:.2f} over {len(rates)} task prompts; {rates}")
    if PARSE_RATES is not None:
        with PARSE_RATES.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"setting": "ce", "constrained": constrained, "limit": LIMIT, "parse_rate": total, "per_prompt": rates}) + "\n")


def test_gguf_file_through_the_cli_equals_the_converted_folder(real_loaded: Any, real_plain: Path, real_gguf: Path, tmp_path: Path) -> None:
    """``evalita-eval run --model X.gguf`` (transformers dequantizes it, tokenizer and chat template
    from the file) gives the results of its float32 conversion on the same backend (hf, batch 8):
    scores, predictions, generations, and log-likelihoods within ``real_close`` (the
    dequantized weights are the converted folder's)."""
    tasks = ["te", "sa", "ner"]
    gguf_out = tmp_path / "gguf"
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"))
    proc = subprocess.run(
        [sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(real_gguf), "--data", str(DATA), "--tasks", ",".join(tasks),
         "--limit", str(LIMIT), "--max-new-tokens", str(MAX_NEW_TOKENS), "--dtype", "float32", "--output-dir", str(gguf_out), "--no-progress"],
        capture_output=True, text=True, env=env, timeout=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "not a valid JSON" not in proc.stderr
    doc = json.loads((gguf_out / "results.json").read_text("utf-8"))
    assert doc["model"]["name_or_path"] == str(real_gguf) and doc["model"]["dtype"] == "float32"
    # The file's content is the model's identity (and the tokenizer is named by the file, not its folder).
    assert doc["model"]["file_sha256"] == hashlib.sha256(real_gguf.read_bytes()).hexdigest()
    assert doc["model"]["tokenizer"] == str(real_gguf) and "tokenizer_files_sha256" not in doc["model"]
    assert list(doc["results"]) == [e.name for e in all_entries() if e.task_id in tasks]
    ref = tmp_path / "plain"
    run_in_process(_backend("hf", real_loaded), "hf", real_plain, ref, tasks=tasks, limit=LIMIT, max_new_tokens=MAX_NEW_TOKENS)
    assert assert_same_run(ref, gguf_out) > 0

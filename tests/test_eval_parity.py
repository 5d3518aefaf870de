"""Parity with lm-evaluation-harness 0.4.13: same tiny model, same data, lm-eval's own task configs.

lm-eval runs in a subprocess (offline) through tests/lm_eval_reference.py; our runner
runs the same entries and prompts. Per request: identical context and continuation
strings, log-likelihoods within 1e-6·|LL| + 1e-5, identical generations and
predictions, and the same task metric.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lm_eval", reason="lm-evaluation-harness (lm-eval==0.4.13, extra 'all') is not installed")
pytest.importorskip("accelerate", reason="lm-eval's hf model needs accelerate (extra 'all')")

from evalita_eval.backend_hf import HFBackend  # noqa: E402
from evalita_eval.runner import ModelInfo, RunConfig, Runner  # noqa: E402
from evalita_eval.tasks import DataSource, select_entries  # noqa: E402

HERE = Path(__file__).parent
DATA = HERE / "data" / "build"
LIMIT = 2
# lm-eval metric name for each of ours.
LM_EVAL_METRIC = {"acc": "acc,none", "ner_f1": "f1,none", "f1_binary": "f1,none", "sentipolc_f1": "f1,none"}


def _reference(tmp: Path, model: Path, k: int, pairs: list[str]) -> dict:
    out = tmp / f"ref{k}.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_DATASETS_CACHE=str(tmp / "hf-datasets"), TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run(
        [sys.executable, str(HERE / "lm_eval_reference.py"), str(out), str(model), str(DATA), str(k), str(LIMIT), *pairs],
        env=env, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def _ours(tmp: Path, model: Path, k: int, pairs: list[str]) -> dict[str, list[dict]]:
    backend = HFBackend(str(model), batch_size=1, dtype="float32")
    out = {}
    for pair in pairs:
        entry, prompt = pair.split(":")
        runner = Runner(backend, ModelInfo(str(model), None, "float32"), DataSource(DATA),
                        RunConfig(num_fewshot=k, limit=LIMIT, prompts=[prompt], progress=False), tmp / f"ours{k}", echo=lambda _m: None)
        res = runner.run(select_entries([entry]))
        samples = [json.loads(line) for line in open(tmp / f"ours{k}" / "samples" / f"{entry}_{prompt}.jsonl", encoding="utf-8")]
        out[pair] = {"samples": samples, "metrics": res.results[entry][prompt]}
    return out


def _compare(ref: dict, ours: dict) -> None:
    for pair, theirs in ref.items():
        mine = ours[pair]["samples"]
        assert len(mine) == len(theirs["samples"]) == LIMIT, pair
        for s_mine, s_ref in zip(mine, theirs["samples"]):
            contexts = {a[0] for a in s_ref["arguments"]}
            assert contexts == {s_mine["prompt"]}, (pair, s_ref["doc_id"])
            if "loglikelihoods" in s_mine:
                assert [a[1] for a in s_ref["arguments"]] == [" " + c for c in s_mine["choices"]]
                lls_ref = [r[0][0] for r in s_ref["resps"]]
                for mine_ll, ref_ll in zip(s_mine["loglikelihoods"], lls_ref, strict=True):
                    assert abs(mine_ll - ref_ll) <= 1e-6 * abs(ref_ll) + 1e-5, (pair, s_ref["doc_id"], mine_ll, ref_ll)
                assert s_mine["prediction"] == max(range(len(lls_ref)), key=lambda i: (lls_ref[i], -i))
            else:
                assert s_mine["generation"] == s_ref["resps"][0][0], (pair, s_ref["doc_id"])
        for ours_name, theirs_name in LM_EVAL_METRIC.items():
            if ours_name in ours[pair]["metrics"] and theirs_name in theirs["metrics"]:
                assert ours[pair]["metrics"][ours_name] == pytest.approx(theirs["metrics"][theirs_name], abs=1e-9), (pair, ours_name)


def test_zero_shot_parity_with_lm_eval(tiny_model: Path, tmp_path: Path) -> None:
    pairs = ["te:p1", "faq:p3", "ner_adg:p1"]
    _compare(_reference(tmp_path, tiny_model, 0, pairs), _ours(tmp_path, tiny_model, 0, pairs))


def test_few_shot_parity_with_lm_eval(tiny_model: Path, tmp_path: Path) -> None:
    # FAQ p1 answers with the option text; SA p5 samples from a train split.
    pairs = ["te:p1", "faq:p1", "sa:p5"]
    _compare(_reference(tmp_path, tiny_model, 2, pairs), _ours(tmp_path, tiny_model, 2, pairs))

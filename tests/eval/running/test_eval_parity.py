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

from paths import TESTS

pytest.importorskip("lm_eval", reason="lm-evaluation-harness (lm-eval==0.4.13, extra 'all') is not installed")
pytest.importorskip("accelerate", reason="lm-eval's hf model needs accelerate (extra 'all')")

from evalita_eval.api import BackendOptions  # noqa: E402
from evalita_eval.backends import create_backend  # noqa: E402
from evalita_eval.running.runner import ModelInfo, Runner  # noqa: E402
from evalita_eval.run_config import RunSpec  # noqa: E402
from evalita_eval.sources.entries import select_entries  # noqa: E402
from evalita_eval.sources.folder import FolderSource  # noqa: E402

HERE = TESTS
DATA = HERE / "data" / "build"
LIMIT = 2
MAX_NEW_TOKENS = 48  # lm-eval's gen_kwargs max_gen_toks; keeps the test quick
# lm-eval metric name for each of ours.
LM_EVAL_METRIC = {"acc": "acc,none", "ner_f1": "f1,none", "f1_binary": "f1,none", "sentipolc_f1": "f1,none"}


# entry:prompt:shots. FAQ p1 answers few-shot examples with the option text; SA p5
# samples them from a train split; NER p1 is generative (stop at a newline).
PAIRS = ["te:p1:0", "faq:p3:0", "ner_adg:p1:0", "te:p1:2", "faq:p1:2", "sa:p5:2"]


CHAT_PAIRS = ["te:p1:2:chat", "ner_adg:p1:1:chat"]


def _lm_eval(model: Path, tmp: Path, pairs: list[str]) -> dict:
    out = tmp / "ref.json"
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_DATASETS_CACHE=str(tmp / "hf-datasets"), TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run(
        [sys.executable, str(HERE / "lm_eval_reference.py"), str(out), str(model), str(DATA), str(LIMIT),
         str(MAX_NEW_TOKENS), *pairs],
        env=env, capture_output=True, text=True,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def reference(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _lm_eval(tiny_model, tmp_path_factory.mktemp("lm-eval"), PAIRS + CHAT_PAIRS)


def _ours(tmp: Path, model: Path, pairs: list[str], chat: bool = False) -> dict[str, dict]:
    backend = create_backend("hf", BackendOptions(str(model), batch_size=1, dtype="float32"))
    out = {}
    for pair in pairs:
        entry, prompt, k = pair.split(":")[:3]
        folder = tmp / pair.replace(":", "_")
        runner = Runner(backend, ModelInfo(str(model), None, "float32"), FolderSource(DATA),
                        RunSpec(model="m", data="data", num_fewshot=int(k), limit=LIMIT, prompts=[prompt], progress=False,
                                  max_new_tokens=MAX_NEW_TOKENS, apply_chat_template=chat), folder, echo=lambda _m: None)
        res = runner.run(select_entries([entry]))
        samples = [json.loads(line) for line in open(folder / "samples" / f"{entry}_{prompt}.jsonl", encoding="utf-8")]
        out[pair] = {"samples": samples, "metrics": res.record.results[entry][prompt]}
    return out


def _compare(ref: dict, ours: dict, delimiter: str = " ") -> None:
    for pair, mine_all in ours.items():
        theirs = ref[pair]
        mine = mine_all["samples"]
        assert len(mine) == len(theirs["samples"]) == LIMIT, pair
        for s_mine, s_ref in zip(mine, theirs["samples"]):
            contexts = {a[0] for a in s_ref["arguments"]}
            assert contexts == {s_mine["prompt"]}, (pair, s_ref["doc_id"])
            if "loglikelihoods" in s_mine:
                assert [a[1] for a in s_ref["arguments"]] == [delimiter + c for c in s_mine["choices"]]
                lls_ref = [r[0][0] for r in s_ref["resps"]]
                for mine_ll, ref_ll in zip(s_mine["loglikelihoods"], lls_ref, strict=True):
                    assert abs(mine_ll - ref_ll) <= 1e-6 * abs(ref_ll) + 1e-5, (pair, s_ref["doc_id"], mine_ll, ref_ll)
                assert s_mine["prediction"] == max(range(len(lls_ref)), key=lambda i: (lls_ref[i], -i))
            else:
                assert s_mine["generation"] == s_ref["resps"][0][0], (pair, s_ref["doc_id"])
        for ours_name, theirs_name in LM_EVAL_METRIC.items():
            if ours_name in mine_all["metrics"] and theirs_name in theirs["metrics"]:
                assert mine_all["metrics"][ours_name] == pytest.approx(theirs["metrics"][theirs_name], abs=1e-9), (pair, ours_name)


def test_zero_shot_parity_with_lm_eval(reference: dict, tiny_model: Path, tmp_path: Path) -> None:
    _compare(reference, _ours(tmp_path, tiny_model, [p for p in PAIRS if p.endswith(":0")]))


def test_few_shot_parity_with_lm_eval(reference: dict, tiny_model: Path, tmp_path: Path) -> None:
    shots = [p for p in PAIRS if p.endswith(":2")]
    _compare(reference, _ours(tmp_path, tiny_model, shots))
    # The examples really are in the context: the prompt of doc 0 holds two answered examples.
    assert reference["te:p1:2"]["samples"][0]["arguments"][0][0].count("\n\n") == 2


def test_chat_template_parity_with_lm_eval(reference: dict, tiny_model: Path, tmp_path: Path) -> None:
    """Chat mode: examples as user/assistant turns, choices scored with no leading space."""
    _compare(reference, _ours(tmp_path, tiny_model, CHAT_PAIRS, chat=True), delimiter="")
    assert reference["te:p1:2:chat"]["samples"][0]["arguments"][0][0].startswith("<s><|user|>")

"""Parity with lm-evaluation-harness 0.4.13 for --system-instruction and --fewshot-as-multiturn.

Same tiny model, data and lm-eval task configs as tests/eval/running/test_eval_parity.py: identical
contexts (system instruction, few-shot turns, or examples folded into one user turn) and
log-likelihoods within the same bound, on TE p1 with two shots.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("lm_eval", reason="lm-evaluation-harness (lm-eval==0.4.13, extra 'all') is not installed")
pytest.importorskip("accelerate", reason="lm-eval's hf model needs accelerate (extra 'all')")

from lm_eval_reference import SYSTEM_INSTRUCTION  # noqa: E402
from test_eval_parity import DATA, LIMIT, MAX_NEW_TOKENS, _compare, _lm_eval  # noqa: E402

from evalita_eval.api import BackendOptions  # noqa: E402
from evalita_eval.backends import create_backend  # noqa: E402
from evalita_eval.running.runner import ModelInfo, Runner  # noqa: E402
from evalita_eval.run_config import RunSpec  # noqa: E402
from evalita_eval.sources.entries import select_entries  # noqa: E402
from evalita_eval.sources.folder import FolderSource  # noqa: E402

PAIRS = ["te:p1:2:sys", "te:p1:2:chat:sys", "te:p1:2:chat:sys:single", "te:p1:2:chat:single"]


def _ours(tmp: Path, model: Path, pair: str) -> dict:
    entry, prompt, k, *modes = pair.split(":")
    chat = "chat" in modes
    config = RunSpec(model="m", data="data", num_fewshot=int(k), limit=LIMIT, prompts=[prompt], progress=False, max_new_tokens=MAX_NEW_TOKENS,
                       apply_chat_template=chat, system_instruction=SYSTEM_INSTRUCTION if "sys" in modes else None,
                       fewshot_as_multiturn=(False if "single" in modes else None) if chat else None)
    folder = tmp / pair.replace(":", "_")
    runner = Runner(create_backend("hf", BackendOptions(str(model), batch_size=1, dtype="float32")), ModelInfo(str(model), None, "float32"), FolderSource(DATA),
                    config, folder, echo=lambda _m: None)
    res = runner.run(select_entries([entry]))
    samples = [json.loads(line) for line in open(folder / "samples" / f"{entry}_{prompt}.jsonl", encoding="utf-8")]
    return {"samples": samples, "metrics": res.record.results[entry][prompt]}


def test_system_instruction_and_multiturn_parity_with_lm_eval(tiny_model: Path, tmp_path: Path) -> None:
    ref = _lm_eval(tiny_model, tmp_path / "lm-eval", PAIRS)
    for pair in PAIRS:
        _compare(ref, {pair: _ours(tmp_path, tiny_model, pair)}, delimiter="" if ":chat" in pair else " ")
    ctx = {p: ref[p]["samples"][0]["arguments"][0][0] for p in PAIRS}
    assert ctx["te:p1:2:sys"].startswith(SYSTEM_INSTRUCTION + "La frase")
    assert ctx["te:p1:2:chat:sys"].startswith(f"<s><|system|>\n{SYSTEM_INSTRUCTION}\n<|user|>\n")
    assert ctx["te:p1:2:chat:sys"].count("<|user|>") == 3 and ctx["te:p1:2:chat:sys:single"].count("<|user|>") == 1

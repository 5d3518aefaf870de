"""--backend vllm on a real model (SmolLM2-135M-Instruct, float32) against the plain HF path.

Runs where ``EVALITA_REAL_MODEL_DIR`` names the folder of the real-model tier
(``DIR/plain``, see tests/realmodel); skips otherwise (fails under ``EVALITA_REQUIRE_REAL_MODEL=1``,
as .ci/run sets it). A module of its own: one vLLM
engine per module (closing one tears down the process-wide state of another).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .engine_helpers import DATA, requires_vllm
from .test_vllm import ENGINE_ARGS  # KV blocks of 32: the CPU attention takes multiples of 32 only
from evalita_eval.api import BackendOptions, LLRequest

pytestmark = requires_vllm

_DIR = os.environ.get("EVALITA_REAL_MODEL_DIR")
REAL = Path(_DIR) / "plain" if _DIR else None
# The bound that holds on the real model (docs/engines.md, measured with bench/tolerance.py).
REL_BOUND, ABS_BOUND = 1e-5, 1e-4


def _real() -> Path:
    if REAL is None or not (REAL / ".complete").is_file():
        if os.environ.get("EVALITA_REQUIRE_REAL_MODEL") == "1":  # .ci/run: a skip would hide the test
            pytest.fail(f"EVALITA_REQUIRE_REAL_MODEL=1 but {REAL} holds no converted model (scripts/real_model.py convert --dir DIR)")
        pytest.skip("no real model: set EVALITA_REAL_MODEL_DIR to the real-model tier's folder (DIR/plain)")
    return REAL


@pytest.fixture(scope="module")
def real_pair():
    from evalita_eval.backends import create_backend

    model = str(_real())
    hf = create_backend("hf", BackendOptions(model=model, dtype="float32", max_length=2048))
    engine = create_backend("vllm", BackendOptions(model=model, dtype="float32", max_length=2048,
                                                   extra={"vllm_engine_args": ENGINE_ARGS, "vllm_loglikelihood": "prefix"}))  # ForceTokens loaded: every plan can run
    yield hf, engine
    engine.close()


def _mc_requests(docs_per_task: int) -> list[LLRequest]:
    """Every prompt of the six MC tasks over the committed test build's first documents."""
    from evalita_eval.settings.fewshot import build_contexts
    from evalita_eval.sources.entries import select_entries

    reqs = []
    for entry in select_entries(["wic", "te", "sa", "hs", "faq", "at"]):
        path = DATA / entry.task_id / f"{entry.spec.eval_split}.jsonl"
        docs = [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()][:docs_per_task]
        task = entry.compiled
        for prompt in task.prompts:
            for ctx, doc in zip(build_contexts(task, prompt, docs, [], 0, 1234), docs):
                reqs += [LLRequest(ctx, " " + c) for c in task.choices(prompt, doc)]
    return reqs


def _predictions(reqs: list[LLRequest], results: list) -> list[int]:
    """Per item (the requests of one context), the index of its best choice."""
    items: dict[str, list[int]] = {}
    for i, r in enumerate(reqs):
        items.setdefault(r.context, []).append(i)
    return [max(idx, key=lambda i: results[i].logprob) for idx in items.values()]


def test_real_model_both_plans_equal_hf_and_prefix_computes_less(real_pair) -> None:
    """Every MC task and prompt, one document each: the same is_greedy and predictions as hf,
    log-likelihoods within the real-model bound, under every request plan."""
    from .test_vllm import _measured

    hf, engine = real_pair
    reqs = _mc_requests(1)
    want = hf.loglikelihood(reqs)
    assert {r.n_tokens for r in want} >= {1, 2} and max(r.n_tokens for r in want) > 5  # one-token and longer answers
    counted = {}
    for mode in ("prompt_logprobs", "prefix", "prefill"):
        engine.scoring = mode
        try:
            got, counted[mode] = _measured(engine, reqs)
        finally:
            engine.scoring = "prefix"
        for req, a, b in zip(reqs, want, got):
            assert (a.n_tokens, a.is_greedy) == (b.n_tokens, b.is_greedy), (mode, req)
            assert abs(a.logprob - b.logprob) <= REL_BOUND * abs(a.logprob) + ABS_BOUND, (mode, req, a.logprob, b.logprob)
        assert _predictions(reqs, want) == _predictions(reqs, got), mode
    # vLLM's counters: exactly the prefix-cache rule's prediction for both plans, and less with prefix reuse.
    from evalita_eval.backends.engine_common import ll_windows
    from evalita_eval.backends.vllm_scoring import plan_loglikelihood
    from vllm_blocks import computed_prompt_tokens, generated, reads_prefix_cache, submitted_calls

    windows = list(dict.fromkeys(ll_windows(engine.tokenizer, reqs, engine.max_length)))
    block = ENGINE_ARGS["block_size"]
    work = {}
    for mode, got in counted.items():
        calls = submitted_calls([c for wave in plan_loglikelihood(windows, mode) for c, _ in wave], block)
        computed = got["vllm:prompt_tokens"] - got["vllm:prompt_tokens_cached"]
        assert computed == computed_prompt_tokens(((c.prompt, reads_prefix_cache(c)) for c in calls), block), (mode, counted)
        assert got["vllm:generation_tokens"] == sum(generated(c) for c in calls), (mode, counted)
        # Model tokens: the computed prompt tokens, and a decode step per generated token but each request's last.
        work[mode] = computed + got["vllm:generation_tokens"] - len(calls)
    # Exact counts (no timing), with blocks of 32 on the test build's short contexts (a context's
    # tail that does not fill a block is computed again by each of its choices): measured 3388
    # (prefill, one resend of a too-deep hit included) against 4590.
    assert work["prefix"] * 1.3 < work["prompt_logprobs"] and work["prefill"] * 1.3 < work["prompt_logprobs"], work

"""--backend vllm with contexts longer than the maximum length: cut on the left as the HF path cuts them.

A module of its own: its engine (max_length 48) must not live beside test_engine_vllm's,
since closing one vLLM engine tears down the process-wide parallel state of the other.
"""

from __future__ import annotations

from pathlib import Path

from .engine_helpers import ll_close, requires_vllm
from evalita_eval.api import GenRequest, LLRequest
from .test_vllm import _requests, _vllm

pytestmark = requires_vllm


def test_left_truncation_equals_hf(tiny32: Path) -> None:
    """Contexts longer than max_length are cut on the left exactly as the HF path cuts them."""
    from evalita_eval.api import BackendOptions
    from evalita_eval.backends import create_backend

    hf = create_backend("hf", BackendOptions(model=str(tiny32), dtype="float32", max_length=48))
    engine = _vllm(tiny32, max_length=48)
    try:
        long = " ".join(r.context for r in _requests() if r.context) * 2
        assert len(hf.tokenizer.encode(long)) > 100
        reqs = [LLRequest(long, " Sì"), LLRequest(long, " Milano e Busseto"), LLRequest("Roma", " " + long[:120])]
        for a, b in zip(hf.loglikelihood(reqs), engine.loglikelihood(reqs)):
            assert (a.n_tokens, a.is_greedy) == (b.n_tokens, b.is_greedy) and ll_close(a.logprob, b.logprob), (a, b)
        gens = [GenRequest(long, (), 10), GenRequest(long[:150], ("\n",), 20)]
        assert engine.generate_until(gens) == hf.generate_until(gens)
    finally:
        engine.close()

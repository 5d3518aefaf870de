"""--backend vllm: the real vLLM engine (CPU build here) against the plain HF reference.

Skipped without vLLM; ``.ci/run`` runs it in ``.venv-vllm`` (see tests/engines/engine_helpers.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .engine_helpers import assert_same_run, ll_close, requires_vllm, run_in_process
from evalita_eval.api import BackendOptions, GenRequest, LLRequest

pytestmark = requires_vllm

ENGINE_ARGS = {"enforce_eager": True}


def _vllm(model: Path, **options):
    from evalita_eval.backends import create_backend

    return create_backend("vllm", BackendOptions(model=str(model), dtype="float32", extra={"vllm_engine_args": ENGINE_ARGS}, **options))


@pytest.fixture(scope="module")
def engine(tiny32: Path):
    backend = _vllm(tiny32)
    yield backend
    backend.close()


def _requests() -> list[LLRequest]:
    """One-token and longer continuations, shared contexts, a duplicate, an empty context."""
    contexts = ["La frase implica logicamente che la seconda frase sia vera? Risposta:", "Qual è la capitale d'Italia?",
                "Il medico ha prescritto una terapia antibiotica per dieci giorni. Il sentimento è "]
    choices = [" Sì", " No", " forse", " Roma", " Milano e Busseto", "positivo", "negativo"]
    reqs = [LLRequest(c, x) for c in contexts for x in choices]
    return reqs + [reqs[0], LLRequest("", "Giuseppe Verdi nacque a Busseto"), LLRequest("", " Roma")]


def _greedy_continuations(hf, contexts: list[str]) -> list[LLRequest]:
    """Each context with the HF model's own greedy continuation: is_greedy must come out True."""
    return [LLRequest(c, g) for c, g in zip(contexts, hf.generate_until([GenRequest(c, (), 3) for c in contexts])) if g.strip()]


def test_loglikelihoods_equal_hf(engine, hf32) -> None:
    reqs = _requests()
    reqs += _greedy_continuations(hf32, sorted({r.context for r in reqs if r.context}))
    want = hf32.loglikelihood(reqs)
    got = engine.loglikelihood(reqs)
    assert engine.dtype == "float32"
    assert {r.n_tokens for r in want} >= {1, 2}  # both paths (one token, several) are exercised
    for req, a, b in zip(reqs, want, got):
        assert (a.n_tokens, a.is_greedy) == (b.n_tokens, b.is_greedy), req
        assert ll_close(a.logprob, b.logprob), (req, a.logprob, b.logprob)
    assert any(r.is_greedy for r in want) and not all(r.is_greedy for r in want)


def test_one_token_choices_are_one_request_per_context(engine, hf32) -> None:
    """Four one-token choices of each of two contexts: two engine requests, not eight."""
    tok = hf32.tokenizer
    one = [t for t in (" Sì", " No", " si", " no", " Roma", "positivo") if len(tok.encode(t, add_special_tokens=False)) == 1][:4]
    assert len(one) == 4
    reqs = [LLRequest(c, x) for c in ("Rispondi sì o no:", "Che bella giornata!") for x in one]
    sent: list[int] = []
    generate = engine.llm.generate

    def counting(prompts, params, **kw):
        sent.append(len(prompts))
        return generate(prompts, params, **kw)

    engine.llm.generate = counting
    try:
        got = engine.loglikelihood(reqs)
    finally:
        engine.llm.generate = generate
    assert sent == [2]
    for a, b in zip(hf32.loglikelihood(reqs), got):
        assert a.is_greedy == b.is_greedy and ll_close(a.logprob, b.logprob)


def test_generations_equal_hf(engine, hf32) -> None:
    contexts = [r.context for r in _requests() if r.context][::7] + ["Elenca i sinonimi: casa,", "Riassumi il seguente articolo di giornale"]
    reqs = [GenRequest(c, stop, n) for c in contexts for stop, n in (((), 12), (("\n\n",), 24), ((",", "."), 16))]
    want = hf32.generate_until(reqs)
    assert engine.generate_until(reqs) == want
    assert any(w for w in want) and len(set(want)) > 3


def test_every_task_and_prompt_same_results_as_hf(engine, hf32, tiny32: Path, tmp_path: Path) -> None:
    """The Runner with --limit 10 on every task and prompt: same results.json scores, predictions,
    generations; log-likelihoods within tolerance."""
    config = {"limit": 10, "max_new_tokens": 24}
    run_in_process(hf32, "hf", tiny32, tmp_path / "hf", **config)
    got = run_in_process(engine, "vllm", tiny32, tmp_path / "vllm", **config)
    assert got["model"]["backend"] == "vllm" and got["model"]["dtype"] == "float32"
    assert assert_same_run(tmp_path / "hf", tmp_path / "vllm") == 366  # every choice of every MC item (the fixtures have few)


def test_one_shot_and_chat_template_same_results_as_hf(engine, hf32, tiny32: Path, tmp_path: Path) -> None:
    config = {"limit": 3, "max_new_tokens": 12, "num_fewshot": 1, "apply_chat_template": True}
    run_in_process(hf32, "hf", tiny32, tmp_path / "hf", **config)
    run_in_process(engine, "vllm", tiny32, tmp_path / "vllm", **config)
    n = assert_same_run(tmp_path / "hf", tmp_path / "vllm")
    assert n == 342  # 3 items x the choices of 36 MC task-prompts

"""--backend vllm: the real vLLM engine (CPU build here) against the plain HF reference.

Skipped without vLLM; ``.ci/run`` runs it in ``.venv-vllm`` (see tests/engines/engine_helpers.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .engine_helpers import assert_same_run, ll_close, requires_vllm, run_in_process
from evalita_eval.api import BackendOptions, GenRequest, LLRequest

pytestmark = requires_vllm

# Stats on: the prefix-reuse test reads vLLM's own token counters. KV blocks of 32 tokens
# (vLLM's CPU default is 128, GPUs' 16; the CPU backend wants multiples of 32).
ENGINE_ARGS = {"enforce_eager": True, "disable_log_stats": False, "block_size": 32}


def _vllm(model: Path, **options):
    """The engine with ForceTokens loaded ("prefix"), so that a test can switch it to any plan (``engine.scoring``)."""
    from evalita_eval.backends import create_backend

    return create_backend("vllm", BackendOptions(model=str(model), dtype="float32",
                                                 extra={"vllm_engine_args": ENGINE_ARGS, "vllm_loglikelihood": "prefix"}, **options))


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


@pytest.fixture(params=["prefill", "prefix", "prompt_logprobs"])
def scoring(request, engine):
    """Each log-likelihood test on every request plan of the one engine (vllm_scoring.MODES)."""
    engine.scoring = request.param
    yield request.param
    engine.scoring = "prefill"


def test_loglikelihoods_equal_hf(engine, hf32, scoring) -> None:
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


def test_one_token_choices_are_one_request_per_context(engine, hf32, scoring) -> None:
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


def _counters(engine) -> dict[str, float]:
    """vLLM's own cumulative counters: prompt tokens, prompt tokens served from the prefix cache, generated tokens,
    and engine steps (``steps``: the observations of the tokens-per-step histogram)."""
    names = ("vllm:prompt_tokens", "vllm:prompt_tokens_cached", "vllm:generation_tokens")
    got = dict.fromkeys(names + ("steps",), 0.0)
    for metric in engine.llm.get_metrics():
        if metric.name in names:
            got[metric.name] += metric.value
        elif metric.name == "vllm:iteration_tokens_total":
            got["steps"] += metric.count
    return got


def _measured(engine, reqs: list[LLRequest]) -> tuple[list, dict[str, float]]:
    engine.llm.reset_prefix_cache()
    before = _counters(engine)
    results = engine.loglikelihood(reqs)
    after = _counters(engine)
    return results, {k: after[k] - before[k] for k in after}


def test_prefix_mode_computes_each_context_once(engine, hf32) -> None:
    """Long contexts with multi-token choices: with prefix reuse vLLM computes each context
    once (its counters say so, to the token, as vllm_blocks.computed_prompt_tokens predicts);
    with prompt log-probs every choice recomputes it. Same numbers as hf either way."""
    from evalita_eval.backends.engine_common import ll_windows
    from evalita_eval.backends.vllm_scoring import plan_loglikelihood
    from vllm_blocks import computed_prompt_tokens, generated, reads_prefix_cache, submitted_calls

    words = "il medico ha prescritto una terapia antibiotica per dieci giorni e la paziente sta meglio".split()
    contexts = [" ".join(words[i:] + words[:i]) * 12 + f" Domanda {i}: cosa è successo? Risposta:" for i in range(3)]
    choices = [" Sì", " No", " la paziente è guarita in fretta", " il medico ha sbagliato terapia", " nessuna delle risposte precedenti",
               " la terapia è durata dieci giorni", " il medico ha prescritto un antibiotico"]
    reqs = [LLRequest(c, x) for c in contexts for x in choices]
    want = hf32.loglikelihood(reqs)
    block = engine.llm.llm_engine.vllm_config.cache_config.block_size
    windows = list(dict.fromkeys(ll_windows(engine.tokenizer, reqs, engine.max_length)))
    work, steps = {}, {}
    for mode in ("prompt_logprobs", "prefix", "prefill"):
        engine.scoring = mode
        try:
            got, counted = _measured(engine, reqs)
        finally:
            engine.scoring = "prefill"
        for a, b in zip(want, got):
            assert (a.n_tokens, a.is_greedy) == (b.n_tokens, b.is_greedy) and ll_close(a.logprob, b.logprob), (mode, a, b)
        calls = submitted_calls([c for wave in plan_loglikelihood(windows, mode) for c, _ in wave], block)
        computed = counted["vllm:prompt_tokens"] - counted["vllm:prompt_tokens_cached"]
        assert computed == computed_prompt_tokens(((c.prompt, reads_prefix_cache(c)) for c in calls), block), (mode, counted, block)
        assert counted["vllm:generation_tokens"] == sum(generated(c) for c in calls)
        work[mode] = computed + counted["vllm:generation_tokens"] - len(calls)  # decode steps: all generated tokens but each request's last
        steps[mode] = counted["steps"]
    context_tokens = sum(len(w.context) for w in windows if w.n_cont > 1)
    assert work["prompt_logprobs"] > context_tokens  # every longer choice recomputed its context
    assert work["prefix"] * 3 < work["prompt_logprobs"] and work["prefill"] * 3 < work["prompt_logprobs"], work
    # The same tokens, but "prefix" generates a longer choice one engine step per token, and
    # "prefill" computes all of them in a few prefill steps (the cost of a step on CPU: docs/engines.md).
    longest = max(w.n_cont for w in windows)
    assert steps["prefix"] >= longest + 1 and steps["prefill"] <= 4 < longest, (steps, longest)


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


def test_one_stream_equals_per_prompt_calls(engine, tiny32: Path, tmp_path: Path, monkeypatch) -> None:
    """Issue 38: vllm takes the whole run's requests of a kind at once (running/stream.py). Against one call per task
    and prompt (``mixes_prompts`` off, bench/vllm_stream.py's reference): the same scores, predictions and
    generations; log-likelihoods within the engines' tolerance, not byte for byte (vLLM's CPU kernels round by
    the batch a request shares: up to 1.3e-5 apart on the real model)."""
    config = {"limit": 3, "max_new_tokens": 12}
    monkeypatch.setattr(engine, "mixes_prompts", False)
    run_in_process(engine, "vllm", tiny32, tmp_path / "per-prompt", **config)
    monkeypatch.undo()
    assert engine.mixes_prompts
    run_in_process(engine, "vllm", tiny32, tmp_path / "stream", **config)
    assert assert_same_run(tmp_path / "per-prompt", tmp_path / "stream") > 100

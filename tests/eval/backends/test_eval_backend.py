"""The batched HF backend agrees with the reference scorer of eval/backends/hf.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalita_eval.api import BackendOptions, GenRequest, LLRequest, cut_at_stop
from evalita_eval.backends import create_backend
from evalita_eval.backend_support.tokenization import encode_pair
from evalita_eval.backends.hf import HFBackend, plain_loglikelihood

REQUESTS = [
    LLRequest("La frase: 'Roma è in Italia.' implica che", " Sì"),
    LLRequest("La frase: 'Roma è in Italia.' implica che", " No"),
    LLRequest("Qual è il sentiment espresso nel seguente tweet: 'Che bella giornata!'? ", "Positivo"),
    LLRequest("Risposta:", " una risposta molto più lunga delle altre, con virgole e accenti: è così"),
    LLRequest("", "Ciao"),
]


@pytest.fixture(scope="module")
def backend(tiny_model: Path) -> HFBackend:
    return create_backend("hf", BackendOptions(str(tiny_model), batch_size=3, dtype="float32"))


def test_batched_loglikelihood_equals_reference(backend: HFBackend) -> None:
    got = backend.loglikelihood(REQUESTS[:4])
    want = plain_loglikelihood(backend.model, backend.tokenizer, REQUESTS[:4], backend.max_length)
    for g, w in zip(got, want, strict=True):
        assert g.n_tokens == w.n_tokens and g.is_greedy == w.is_greedy
        assert abs(g.logprob - w.logprob) <= 1e-6 * abs(w.logprob) + 1e-5


def test_left_truncation_matches_reference(backend: HFBackend) -> None:
    backend.max_length, saved = 12, backend.max_length
    try:
        got = backend.loglikelihood(REQUESTS[:3])
        want = plain_loglikelihood(backend.model, backend.tokenizer, REQUESTS[:3], 12)
        with pytest.raises(ValueError, match="more than the model's maximum length 12"):
            backend.loglikelihood(REQUESTS[3:4])
    finally:
        backend.max_length = saved
    full = backend.loglikelihood(REQUESTS[:3])
    for g, w, f in zip(got, want, full, strict=True):
        assert abs(g.logprob - w.logprob) <= 1e-6 * abs(w.logprob) + 1e-5
        assert g.logprob != f.logprob  # the truncation really dropped context


def test_empty_context_uses_the_prefix_token(backend: HFBackend) -> None:
    [res] = backend.loglikelihood(REQUESTS[4:])
    assert res.n_tokens == len(backend.tokenizer.encode("Ciao")) and res.logprob < 0


def test_bos_is_added_like_lm_eval(backend: HFBackend) -> None:
    tok = backend.tokenizer
    ctx, cont = encode_pair(tok, "Risposta: ", "Sì")
    assert ctx[0] == tok.bos_token_id and tok.decode(cont) == " Sì"
    # a context that already starts with the BOS string (a chat template) gets no second one
    ctx, _ = encode_pair(tok, "<s>Risposta:", " Sì")
    assert ctx.count(tok.bos_token_id) == 1


def test_generation_is_greedy_and_cut_at_stop(backend: HFBackend) -> None:
    reqs = [GenRequest("Testo: 'Mario vive a Roma.' Entità:", ("\n",), 12), GenRequest("Riassumi:", ("</s>",), 5)]
    one = [backend.generate_until([r])[0] for r in reqs]
    assert backend.generate_until(reqs) == one  # batched, left-padded: the same text
    assert "\n" not in one[0]
    assert len(backend.tokenizer.encode(one[1], add_special_tokens=False)) <= 6


def test_cut_at_stop() -> None:
    assert cut_at_stop("Roma$LOC\naltro</s>", ["</s>", "\n"]) == "Roma$LOC"
    assert cut_at_stop("niente", ["", "\n"]) == "niente"


def test_generation_batches_are_timed_in_two_phases(backend: HFBackend) -> None:
    """The hf backend's streamer counts every generate call: its rows, its prompt pass's (padded) tokens, and
    the decode steps after the prompt pass's token (running/estimate.py prices the two apart)."""
    from evalita_eval.backend_support.phase_clock import GenerationPhases

    backend.generation_phases = GenerationPhases()
    reqs = [GenRequest("Riassumi questo testo:", (), 5)] * 4 + [GenRequest("Ciao", (), 3)]  # no stop: every budget is used
    backend.generate_until(reqs)
    p = backend.generation_phases
    widths = [len(backend.tokenizer.encode("Riassumi questo testo:")), len(backend.tokenizer.encode("Ciao"))]
    assert (p.batches, p.rows) == (3, 5)  # batch size 3: the 5-token group in batches of 3 and 1, the 3-token group alone
    assert p.prompt_tokens == 3 * widths[0] + widths[0] + widths[1]
    assert p.steps == 4 + 4 + 2  # the tiny model writes no end-of-text within these budgets
    assert p.measured and p.prompt_s > 0 and p.step_s > 0

"""The batched HF backend agrees with the reference scorer of eval/backends/hf.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalita_eval.api import BackendOptions, GenRequest, LLRequest, cut_at_stop
from evalita_eval.backends import create_backend
from evalita_eval.backends.hf import HFBackend, encode_pair, plain_loglikelihood

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

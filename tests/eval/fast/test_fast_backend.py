"""FastBackend equals the plain reference: log-likelihoods within 1e-6*|LL|+1e-5, same is_greedy, same generations."""

import random

import pytest
from fast_helpers import mixed_requests as _requests, random_text as _text, tiny_lm, within_bound  # noqa: F401  (tiny_lm is a fixture)

from evalita_eval.api import GenRequest, LLRequest
from evalita_eval.backends.hf import encode_pair, encode_request, plain_loglikelihood
from evalita_eval.fast import FastBackend
from evalita_eval.fast.encode import encode_requests
from evalita_eval.fast.generate import cut_at_stop
from evalita_eval.fast.reference import plain_generate_until

MAX_LENGTH = 48


def test_batched_encoding_matches_encode_pair(tiny_lm):
    _, tok = tiny_lm
    reqs = [LLRequest("Ciao come ", "stai"), LLRequest("La frase", " Sì"), LLRequest(" ", "No"), LLRequest("a\n", " b")]
    assert encode_requests(tok, reqs) == [encode_pair(tok, r.context, r.continuation) for r in reqs]


def test_batched_encoding_calls_the_tokenizer_in_bounded_groups(tiny_lm, monkeypatch):
    """At most ENCODE_GROUP texts per tokenizer call, ids only (the call's memory is bounded);
    the same ids as one request at a time."""
    import evalita_eval.fast.encode as encode

    model, tok = tiny_lm
    reqs = _requests(random.Random(5), model, tok)
    calls: list[tuple[int, bool]] = []

    class Counting:
        def __getattr__(self, name):
            return getattr(tok, name)

        def __call__(self, texts, **kwargs):
            calls.append((len(texts), kwargs.get("return_attention_mask", True)))
            return tok(texts, **kwargs)

    monkeypatch.setattr(encode, "ENCODE_GROUP", 3)
    assert encode_requests(Counting(), reqs) == [encode_request(tok, r) for r in reqs]
    assert len(calls) > 2 and max(n for n, _ in calls) == 3 and not any(mask for _, mask in calls)


@pytest.mark.parametrize("max_batch_tokens,max_tree_tokens", [(48, 16), (200, 64), (4096, 512)])
def test_fast_loglikelihood_equals_plain(tiny_lm, max_batch_tokens, max_tree_tokens):
    model, tok = tiny_lm
    reqs = _requests(random.Random(max_tree_tokens), model, tok)
    ref = plain_loglikelihood(model, tok, reqs, MAX_LENGTH)
    got = FastBackend(model, tok, MAX_LENGTH, max_batch_tokens, max_tree_tokens=max_tree_tokens).loglikelihood(reqs)
    assert len(got) == len(reqs)
    for req, r, g in zip(reqs, ref, got):
        assert within_bound(g.logprob, r.logprob), (req, g.logprob, r.logprob)
        assert (g.is_greedy, g.n_tokens) == (r.is_greedy, r.n_tokens), req
    assert any(r.is_greedy for r in ref) and not all(r.is_greedy for r in ref)
    assert any(len(tok.encode(r.context)) > MAX_LENGTH for r in reqs)  # truncation was exercised


def test_continuation_without_tokens_is_an_error(tiny_lm):
    model, tok = tiny_lm
    with pytest.raises(ValueError, match="encodes to no tokens"):
        FastBackend(model, tok, MAX_LENGTH).loglikelihood([LLRequest("la frase", "")])


def test_cut_at_stop_keeps_text_before_the_first_stop():
    assert cut_at_stop("uno, due\ntre", ("\n", ",")) == "uno"
    assert cut_at_stop("uno due", ("", "\n")) == "uno due"


@pytest.mark.parametrize("max_batch_tokens", [MAX_LENGTH, 400])
def test_generation_equals_plain_greedy(tiny_lm, max_batch_tokens):
    model, tok = tiny_lm
    rng = random.Random(7)
    reqs = [
        GenRequest(_text(rng, 1, 40), tuple(rng.sample(["\n", ",", "e", "a", " "], rng.randint(0, 2))), rng.randint(1, 20))
        for _ in range(16)
    ]
    ref = plain_generate_until(model, tok, reqs, MAX_LENGTH)
    got = FastBackend(model, tok, MAX_LENGTH, max_batch_tokens).generate_until(reqs)
    assert got == ref
    # The stops did cut some outputs and others ran to max_new_tokens.
    assert any(r.stop and len(tok.encode(g)) < r.max_new_tokens for r, g in zip(reqs, got))

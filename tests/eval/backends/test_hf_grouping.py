"""lm-eval's one forward pass per context on the ``hf`` backend: requests whose
``context + continuation[:-1]`` tokens are equal share one row, and score as the plain path."""

from __future__ import annotations

import random

import pytest
import torch
from scoring_helpers import mixed_requests, tiny_lm, within_bound  # noqa: F401  (tiny_lm is a fixture)

from evalita_eval.api import LLRequest, scoring_input
from evalita_eval.backends import hf
from evalita_eval.backends.hf import HFBackend, encode_request, plain_loglikelihood
from evalita_eval.backends.hf_batches import longest_first, scoring_groups

MAX_LENGTH = 48


def test_groups_are_keyed_by_context_and_continuation_but_its_last_token():
    encoded = [([1, 2], [3]), ([1, 2], [4]), ([1], [2, 5]), ([1, 2], [3, 6]), ([9], [3]), ([1], [2, 7])]
    # (1, 2): requests 0, 1 and 2 and 5 (context [1] + [2]); the first longest (2) leads.
    assert scoring_groups(encoded) == [[2, 0, 1, 5], [3], [4]]
    assert longest_first(scoring_groups(encoded), encoded) == [1, 0, 2]  # 4 tokens, then 3 and 2


def test_one_token_choices_of_one_context_take_one_row(tiny_lm, monkeypatch):
    model, tok = tiny_lm
    contexts = ["la frase implica che", "il contatore dell'acqua è così perché"]
    # Continuations of one token after each context, and one longer (its own row).
    singles = [w for w in (" Sì", " No", " A", " B", " la", " non") if all(len(encode_request(tok, LLRequest(c, w))[1]) == 1 for c in contexts)]
    assert len(singles) >= 3
    reqs = [LLRequest(c, w) for c in contexts for w in singles] + [LLRequest(contexts[0], " la risposta è così")]
    rows: list[int] = []
    scores = hf.continuation_scores

    def recorded(model, ids, keep, targets):
        rows.append(ids.shape[0])
        return scores(model, ids, keep, targets)

    monkeypatch.setattr(hf, "continuation_scores", recorded)
    got = HFBackend(model, tok, max_length=MAX_LENGTH, batch_size=8).loglikelihood(reqs)
    assert rows == [3]  # two contexts and the long continuation, not len(reqs) rows
    plain = plain_loglikelihood(model, tok, reqs, MAX_LENGTH)
    assert [(r.is_greedy, r.n_tokens) for r in got] == [(r.is_greedy, r.n_tokens) for r in plain]
    assert all(within_bound(g.logprob, p.logprob) for g, p in zip(got, plain))
    assert len({r.logprob for r in got[: len(singles)]}) == len(singles)  # each choice its own token's score


@pytest.mark.parametrize("chunk_rows", [1, 2])
def test_a_longer_continuation_leads_its_group_through_chunked_rows(tiny_lm, monkeypatch, chunk_rows):
    """A request whose context is another's context + its first tokens reads the same input:
    both score in one row, the shorter at the run's last positions, across chunk borders."""
    model, tok = tiny_lm
    ctx, cont = "la frase implica che", " il contatore dell'acqua"
    c_ids, x_ids = encode_request(tok, LLRequest(ctx, cont))
    assert len(x_ids) >= 3
    longer = LLRequest(ctx, cont)
    # The same input, split two tokens later: context + the first tokens, one last token.
    shorter = LLRequest(tok.decode(c_ids[1:] + x_ids[:-1]), tok.decode(x_ids[-1:]))
    assert scoring_groups([encode_request(tok, r) for r in (shorter, longer)]) == [[1, 0]]
    monkeypatch.setattr(hf, "LOGIT_CHUNK_ELEMENTS", chunk_rows * model.config.vocab_size)
    got = HFBackend(model, tok, max_length=MAX_LENGTH, batch_size=4).loglikelihood([shorter, longer])
    plain = plain_loglikelihood(model, tok, [shorter, longer], MAX_LENGTH)
    assert [r.n_tokens for r in got] == [1, len(x_ids)]
    assert [r.is_greedy for r in got] == [r.is_greedy for r in plain]
    assert all(within_bound(g.logprob, p.logprob) for g, p in zip(got, plain))
    with torch.inference_mode():
        last = torch.log_softmax(model(torch.tensor([c_ids + x_ids[:-1]])).logits[0, -1].float(), dim=-1)[x_ids[-1]]
    assert within_bound(got[0].logprob, float(last))


@pytest.mark.parametrize("batch", [1, 8])
def test_hf_runs_no_more_model_tokens_than_lm_evals_hf(tiny_lm, batch):
    """The rows the backend runs (its own grouping) against lm-eval 0.4.13's Collator on the
    same tokens: the same groups, so the same model tokens (bench/work.py counts the benchmark)."""
    collator = pytest.importorskip("lm_eval.models.utils").Collator

    model, tok = tiny_lm
    pairs = [encode_request(tok, r) for r in mixed_requests(random.Random(3), model, tok)]
    groups = scoring_groups(pairs)
    ours = [len(scoring_input(*pairs[g[0]], MAX_LENGTH)) for g in groups]
    theirs_coll = collator([(None, c, x) for c, x in pairs], sort_fn=lambda r: (-len(r[1] + r[2]), tuple(r[1] + r[2])),
                           group_by="contexts", group_fn=lambda r: r[-2] + r[-1][:-1])
    theirs = [len((c + x)[-(MAX_LENGTH + 1):][:-1]) for chunk in theirs_coll.get_batched(n=batch) for _, c, x in chunk]
    assert len(ours) == len(theirs) < len(pairs)
    assert sum(ours) == sum(theirs)

"""Log-likelihoods with logits only at the continuation positions: the same numbers as the
full-vocabulary batched path and the plain reference; token-budget batches (--batch-size auto)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from paths import TEST_DATA
from scoring_helpers import mixed_requests, tiny_lm, within_bound  # noqa: F401  (tiny_lm is a fixture)

from evalita_eval.api import LLResult, scoring_input
from evalita_eval.backends.hf import HFBackend, encode_request, logits_at, plain_loglikelihood, token_budget_batches
from evalita_eval.backends.hf_batches import scoring_groups
from evalita_eval.cli import main
from evalita_eval.backend_support.memory import forward_bytes, parse_memory

MAX_LENGTH = 48
DATA = TEST_DATA / "build"


def full_vocabulary_batches(model, tok, requests, batch_size: int) -> list[LLResult]:
    """The hf backend's path before this change: log_softmax over every position of the batch."""
    encoded = [encode_request(tok, r) for r in requests]
    inputs_of = [scoring_input(c, t, MAX_LENGTH, r.continuation) for r, (c, t) in zip(requests, encoded)]
    order = sorted(range(len(requests)), key=lambda i: -len(encoded[i][0] + encoded[i][1]))
    out: list = [None] * len(requests)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            width = max(len(inputs_of[i]) for i in batch)
            ids = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                ids[row, : len(inputs_of[i])] = torch.tensor(inputs_of[i])
            logprobs = torch.log_softmax(model(ids).logits.float(), dim=-1)
            for row, i in enumerate(batch):
                n, cont = len(inputs_of[i]), encoded[i][1]
                lp = logprobs[row, n - len(cont) : n]
                target = torch.tensor(cont)
                out[i] = LLResult(float(lp.gather(1, target[:, None])[:, 0].sum()), bool((lp.argmax(-1) == target).all()), len(cont))
    return out


@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_scored_positions_only_equal_the_full_vocabulary_path(tiny_lm, batch_size):
    model, tok = tiny_lm
    reqs = mixed_requests(random.Random(3), model, tok)
    got = HFBackend(model, tok, max_length=MAX_LENGTH, batch_size=batch_size).loglikelihood(reqs)
    assert any(r.is_greedy for r in got) and not all(r.is_greedy for r in got)
    # The vocabulary projection of fewer rows rounds differently (the matrix kernel's blocks
    # depend on the row count), so equal within float rounding, not bit for bit; the plain
    # path and the full batched one already differ that much from each other.
    for reference in (full_vocabulary_batches(model, tok, reqs, batch_size), plain_loglikelihood(model, tok, reqs, MAX_LENGTH)):
        assert [(r.is_greedy, r.n_tokens) for r in got] == [(r.is_greedy, r.n_tokens) for r in reference]
        assert max(abs(g.logprob - r.logprob) for g, r in zip(got, reference)) < 1e-5
        assert all(within_bound(g.logprob, r.logprob) for g, r in zip(got, reference))


def test_logits_projected_in_chunks_of_rows(tiny_lm, monkeypatch):
    """Continuations longer than a chunk (here 3 rows) are projected and scored chunk by chunk."""
    import evalita_eval.backends.hf as hf

    model, tok = tiny_lm
    reqs = mixed_requests(random.Random(3), model, tok)
    monkeypatch.setattr(hf, "LOGIT_CHUNK_ELEMENTS", 3 * model.config.vocab_size)
    got = HFBackend(model, tok, max_length=MAX_LENGTH, batch_size=4).loglikelihood(reqs)
    assert max(r.n_tokens for r in got) > 3
    plain = plain_loglikelihood(model, tok, reqs, MAX_LENGTH)
    assert [(r.is_greedy, r.n_tokens) for r in got] == [(r.is_greedy, r.n_tokens) for r in plain]
    assert all(within_bound(g.logprob, p.logprob) for g, p in zip(got, plain))


class NoKeepArgument(torch.nn.Module):
    """A causal LM whose forward takes no ``logits_to_keep`` (older or remote-code models)."""

    def __init__(self, inner) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, input_ids, use_cache=False):
        return self.inner(input_ids=input_ids, use_cache=use_cache)


def test_models_without_logits_to_keep_are_sliced(tiny_lm):
    model, _ = tiny_lm
    ids = torch.randint(3, 900, (3, 20), generator=torch.Generator().manual_seed(0))
    keep = torch.zeros((3, 20), dtype=torch.bool)
    keep[0, 5:9] = keep[2, 19] = True
    with torch.inference_mode():
        full = model(ids).logits[keep]
        # Projecting only the kept rows changes the matrix kernel's blocking (and so float32
        # rounding) with the row count and the thread count: equal up to rounding.
        kept = logits_at(model, keep, input_ids=ids)
        assert kept.shape == full.shape and torch.allclose(kept, full, rtol=0, atol=1e-5)
        # Without logits_to_keep the full logits are computed and sliced: exactly equal.
        assert torch.equal(logits_at(NoKeepArgument(model), keep, input_ids=ids), full)


def test_token_budget_batches_are_cut_at_the_budget():
    cost = lambda rows, width, scored: rows * width + 10 * scored  # noqa: E731
    lengths, scored = [10, 8, 8, 5, 40], [1, 1, 2, 1, 1]
    assert token_budget_batches([0, 1, 2, 3], lengths, scored, cost, 60) == [[0, 1], [2, 3]]  # 3 rows: 30 + 40 > 60
    assert token_budget_batches([0, 1, 2, 3], lengths, scored, cost, 70) == [[0, 1, 2], [3]]
    assert token_budget_batches([0, 1, 2, 3], lengths, scored, cost, 19) == [[0], [1], [2], [3]]
    assert token_budget_batches([4, 0], lengths, scored, cost, 10) == [[4], [0]]  # alone over the budget: a batch of its own


def test_auto_batch_size_fits_the_memory_budget(tiny_lm):
    model, tok = tiny_lm
    reqs = mixed_requests(random.Random(3), model, tok)
    plain = plain_loglikelihood(model, tok, reqs, MAX_LENGTH)
    budget = 4 * forward_bytes(model.config, 4, 1, MAX_LENGTH, 5)
    backend = HFBackend(model, tok, max_length=MAX_LENGTH, batch_size=None, max_memory=budget)
    sizes: list[int] = []
    cut = backend._scoring_batches

    def recorded(*args):
        batches = cut(*args)
        sizes.extend(len(b) for b in batches)
        return batches

    backend._scoring_batches = recorded
    got = backend.loglikelihood(reqs)
    # One row per group of requests reading the same input (lm-eval's grouping), fewer than requests.
    rows = len(scoring_groups([encode_request(tok, r) for r in reqs]))
    assert max(sizes) > 1 and sum(sizes) == rows < len(reqs)
    assert [r.is_greedy for r in got] == [r.is_greedy for r in plain]
    assert all(within_bound(g.logprob, p.logprob) for g, p in zip(got, plain))


def test_cpu_batches_are_cut_into_passes_of_at_most_cpu_pass_tokens(tiny_lm, monkeypatch):
    """--batch-size 8 on CPU: each batch is scored in forward passes of at most CPU_PASS_TOKENS
    padded tokens (a request alone over it: a pass of its own), same results as the plain path;
    the freed memory goes back to the system once per pass, not once per allocation (issue 48)."""
    import evalita_eval.backends.hf as hf

    model, tok = tiny_lm
    reqs = mixed_requests(random.Random(3), model, tok)
    plain = plain_loglikelihood(model, tok, reqs, MAX_LENGTH)
    monkeypatch.setattr(hf, "CPU_PASS_TOKENS", 40)
    shapes: list[tuple[int, int]] = []
    scores = hf.continuation_scores

    def recorded(model, ids, keep, targets):
        shapes.append(tuple(ids.shape))
        return scores(model, ids, keep, targets)

    monkeypatch.setattr(hf, "continuation_scores", recorded)
    trims: list[int] = []
    monkeypatch.setattr(hf, "return_freed_memory", lambda: trims.append(len(shapes)))
    got = HFBackend(model, tok, max_length=MAX_LENGTH, batch_size=8).loglikelihood(reqs)
    groups = len(scoring_groups([encode_request(tok, r) for r in reqs]))
    assert sum(rows for rows, _ in shapes) == groups and len(shapes) > -(-groups // 8)
    assert trims == list(range(1, len(shapes) + 1))  # after each pass
    assert all(rows * width <= 40 or rows == 1 for rows, width in shapes) and any(rows > 1 for rows, _ in shapes)
    assert [(r.is_greedy, r.n_tokens) for r in got] == [(r.is_greedy, r.n_tokens) for r in plain]
    assert all(within_bound(g.logprob, p.logprob) for g, p in zip(got, plain))


@pytest.mark.parametrize("text,expected", [("4GiB", 4 << 30), ("512MiB", 512 << 20), ("2GB", 2 * 10**9), ("1.5gib", 3 << 29), ("1000", 1000)])
def test_parse_memory(text, expected):
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text", ["", "4 parsecs", "-1GiB", "0", "GiB"])
def test_parse_memory_refuses(text):
    with pytest.raises(ValueError, match="memory size"):
        parse_memory(text)


def test_run_auto_batches_and_records_peak_memory(tiny_model: Path, tmp_path: Path):
    common = ["run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "te,faq", "--limit", "2", "--no-progress"]
    auto = CliRunner().invoke(main, [*common, "--batch-size", "auto", "--max-memory", "64MiB", "--output-dir", str(tmp_path / "auto")])
    assert auto.exit_code == 0, auto.output
    fixed = CliRunner().invoke(main, [*common, "--output-dir", str(tmp_path / "fixed")])
    assert fixed.exit_code == 0, fixed.output
    doc = json.loads((tmp_path / "auto" / "results.json").read_text())
    assert doc["config"]["batch_size"] == "auto" and doc["config"]["max_memory"] == 64 << 20
    assert set(doc["resources"]) == {"te", "faq"} and all(r["max_rss_mib"] > 50 for r in doc["resources"].values())
    want = json.loads((tmp_path / "fixed" / "results.json").read_text())["results"]
    for task, prompts in want.items():
        for prompt, scores in prompts.items():
            assert doc["results"][task][prompt] == pytest.approx(scores, abs=1e-9)
    bad = CliRunner().invoke(main, [*common, "--batch-size", "many", "--output-dir", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "--batch-size: expected a positive integer or auto, got 'many'" in bad.output


def test_server_backends_refuse_auto_batches():
    from evalita_eval.api import BackendOptions
    from evalita_eval.backends import create_backend

    with pytest.raises(ValueError, match="--batch-size auto"):
        create_backend("openai-completions", BackendOptions("m", batch_size=None, extra={"base_url": "http://127.0.0.1:9/v1"}))

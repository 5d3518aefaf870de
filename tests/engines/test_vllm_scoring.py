"""The request plan of --backend vllm's log-likelihoods (no engine needed: runs everywhere)."""

from __future__ import annotations

import dataclasses

import pytest

from evalita_eval.backends.engine_common import LLWindow
from evalita_eval.backends.vllm_scoring import MAX_TRACKED_TOKENS, plan_loglikelihood
from vllm_blocks import computed_prompt_tokens, generated, prompt_logprobs, reads_prefix_cache, submitted_calls


def _windows() -> list[LLWindow]:
    a, b = (5, 6, 7), (5, 6, 8, 9)
    return [
        LLWindow(a + (10,), 1), LLWindow(a + (11,), 1),  # two one-token choices of context a
        LLWindow(a + (12, 13), 2), LLWindow(a + (14, 15, 16), 3),  # two longer choices of a
        LLWindow(b + (20, 21), 2),  # b: a longer choice only
        LLWindow(b + (22,), 1),
    ]


def test_prefix_mode_one_request_per_context_and_per_longer_choice() -> None:
    waves = plan_loglikelihood(_windows(), "prefix")
    got = [[(c.kind, c.prompt, c.tokens, [w.ids for w in ws]) for c, ws in wave] for wave in waves]
    assert got == [
        [("last", (5, 6, 7), (10, 11), [(5, 6, 7, 10), (5, 6, 7, 11)]),
         ("last", (5, 6, 8, 9), (22,), [(5, 6, 8, 9, 22)])],
        [("forced", (5, 6, 7), (12, 13), [(5, 6, 7, 12, 13)]),
         ("forced", (5, 6, 7), (14, 15, 16), [(5, 6, 7, 14, 15, 16)]),
         ("forced", (5, 6, 8, 9), (20, 21), [(5, 6, 8, 9, 20, 21)])],
    ]
    plan = [x for wave in waves for x in wave]
    # The prompt of every request is its context: nothing asks for prompt log-probs.
    assert not any(prompt_logprobs(c) for c, _ in plan)
    assert [generated(c) for c, _ in plan] == [1, 1, 2, 3, 2]


def test_prefill_mode_reads_every_first_token_after_its_context_then_the_rest_from_the_cache() -> None:
    waves = plan_loglikelihood(_windows(), "prefill")
    got = [[(c.kind, c.prompt, c.tokens, c.context_len, [w.ids for w in ws]) for c, ws in wave] for wave in waves]
    a, b = (5, 6, 7), (5, 6, 8, 9)
    assert got == [
        [("last", a, (10, 11, 12, 14), 0, [a + (10,), a + (11,), a + (12, 13), a + (14, 15, 16)]),
         ("last", b, (20, 22), 0, [b + (20, 21), b + (22,)])],
        [("cached", a + (12,), (13,), 3, [a + (12, 13)]),
         ("cached", a + (14, 15), (16,), 3, [a + (14, 15, 16)]),
         ("cached", b + (20,), (21,), 4, [b + (20, 21)])],
    ]
    plan = [c for wave in waves for c, _ in wave]
    assert all(reads_prefix_cache(c) for c in plan) and [prompt_logprobs(c) for c in plan] == [False] * 2 + [True] * 3


class _Out:
    def __init__(self, num_cached_tokens: object) -> None:
        self.num_cached_tokens = num_cached_tokens


def test_a_cache_hit_past_the_context_is_sent_again_without_the_cache() -> None:
    """vLLM returns prompt log-probs only for the positions it computed: a hit that covers
    the second continuation token (another choice with the same first tokens) means resend."""
    call = plan_loglikelihood([LLWindow((1, 2, 3, 4, 5, 6), 3)], "prefill")[1][0][0]
    assert (call.prompt, call.context_len) == ((1, 2, 3, 4, 5), 3)
    assert [call.cache_too_deep(_Out(hit)) for hit in (0, 2, 3, 4)] == [False, False, False, True]
    again = dataclasses.replace(call, reads_cache=False)
    assert not again.cache_too_deep(_Out(4)) and not reads_prefix_cache(again)
    for bad in (None, -1, 6, 2.0):
        with pytest.raises(RuntimeError, match="num_cached_tokens"):
            call.cache_too_deep(_Out(bad))


def test_prompt_logprobs_mode_is_the_former_path() -> None:
    plan = [x for wave in plan_loglikelihood(_windows(), "prompt_logprobs") for x in wave]
    longer = [(c.prompt, c.tokens) for c, _ in plan if c.kind == "prompt"]
    assert longer == [((5, 6, 7, 12), (13,)), ((5, 6, 7, 14, 15), (16,)), ((5, 6, 8, 9, 20), (21,))]
    assert [c.kind for c, _ in plan] == ["last", "last", "prompt", "prompt", "prompt"]


def test_many_one_token_choices_split_at_the_tracking_limit() -> None:
    windows = [LLWindow((1, 2, 1000 + t), 1) for t in range(MAX_TRACKED_TOKENS + 3)]
    (plan,) = plan_loglikelihood(windows, "prefix")
    assert [len(c.tokens) for c, _ in plan] == [MAX_TRACKED_TOKENS, 3]
    assert [w for _, ws in plan for w in ws] == windows


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="vllm_loglikelihood must be one of prefill, prefix, prompt_logprobs"):
        plan_loglikelihood(_windows(), "fast")


def test_computed_prompt_tokens_follows_vllms_block_rule() -> None:
    """Whole cached blocks are reused, never the prompt's last token, never by prompt-log-prob requests."""
    ctx = tuple(range(100, 110))  # 10 tokens, blocks of 4: two whole blocks
    prompts = [(ctx, True), (ctx, True), (ctx + (7,), True), (ctx[:8], True), (ctx, False), ((1,) + ctx, True)]
    # 10 | 10-8 | 11-8 | 8-4 (the last token is never a hit) | 10 (no read) | 11 (other first block)
    assert computed_prompt_tokens(prompts, 4) == 10 + 2 + 3 + 4 + 10 + 11


def test_submitted_calls_add_the_resends_the_block_rule_predicts() -> None:
    """Two choices sharing their first three tokens: the second one's cache hit (a block of 4
    across the context's end) covers a position it scores, so it is sent again without the cache."""
    ctx = (1, 2, 3)
    windows = [LLWindow(ctx + (9, 9, 9, 5), 4), LLWindow(ctx + (9, 9, 9, 6), 4), LLWindow(ctx + (7, 8), 2)]
    calls = [c for wave in plan_loglikelihood(windows, "prefill") for c, _ in wave]
    sent = submitted_calls(calls, 4)
    assert sent[:4] == calls and [(c.prompt, c.reads_cache) for c in sent[4:]] == [(ctx + (9, 9, 9), False)]
    # 3 (the context) | 6 | 6 - 4 (the block [1, 2, 3, 9]) | 4 - 0 ([1, 2, 3, 7] is new) | 6 again, no read
    assert computed_prompt_tokens(((c.prompt, reads_prefix_cache(c)) for c in sent), 4) == 3 + 6 + 2 + 4 + 6
    assert submitted_calls(calls, 8) == calls  # blocks of 8: no hit past the context

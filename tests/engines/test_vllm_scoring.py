"""The request plan of --backend vllm's log-likelihoods (no engine needed: runs everywhere)."""

from __future__ import annotations

import pytest

from evalita_eval.backends.engine_common import LLWindow
from evalita_eval.backends.vllm_scoring import MAX_TRACKED_TOKENS, computed_prompt_tokens, plan_loglikelihood


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
    assert not any(c.prompt_logprobs for c, _ in plan)
    assert [c.generated for c, _ in plan] == [1, 1, 2, 3, 2]


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
    with pytest.raises(ValueError, match="vllm_loglikelihood must be one of prefix, prompt_logprobs"):
        plan_loglikelihood(_windows(), "fast")


def test_computed_prompt_tokens_follows_vllms_block_rule() -> None:
    """Whole cached blocks are reused, never the prompt's last token, never by prompt-log-prob requests."""
    ctx = tuple(range(100, 110))  # 10 tokens, blocks of 4: two whole blocks
    prompts = [(ctx, True), (ctx, True), (ctx + (7,), True), (ctx[:8], True), (ctx, False), ((1,) + ctx, True)]
    # 10 | 10-8 | 11-8 | 8-4 (the last token is never a hit) | 10 (no read) | 11 (other first block)
    assert computed_prompt_tokens(prompts, 4) == 10 + 2 + 3 + 4 + 10 + 11

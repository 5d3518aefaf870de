"""lm-eval tokenisation of many requests at once (one batched tokenizer call per list).

Gives exactly :func:`evalita_eval.backends.hf.encode_request` for every request, including its
rule for special tokens (added unless the text already starts with the BOS string).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..api import LLRequest
from ..modeling.tokenization import default_add_special_tokens, prefix_token_id

Key = tuple[str, bool]  # (text, add special tokens)


# Texts per tokenizer call: the Rust tokenizer builds a full Encoding (tokens, offsets, masks)
# of every text of a call before any is returned, several times the ids' size; FAQ prompts that
# list every option (1604 requests, 1.3M tokens in one call) took 154 MiB at once, most of it
# kept by the allocator afterwards.
ENCODE_GROUP = 128


def _batch_encode(tokenizer: Any, keys: list[Key]) -> dict[Key, list[int]]:
    out: dict[Key, list[int]] = {}
    for special in (False, True):
        unique = [text for text, flag in dict.fromkeys(keys) if flag is special]
        for start in range(0, len(unique), ENCODE_GROUP):
            group = unique[start : start + ENCODE_GROUP]
            ids = tokenizer(group, add_special_tokens=special, return_attention_mask=False)["input_ids"]
            out.update(zip(((t, special) for t in group), ids))
    return out


def encode_requests(tokenizer: Any, requests: Sequence[LLRequest]) -> list[tuple[list[int], list[int]]]:
    """(context ids, continuation ids) per request, equal to ``backends.hf.encode_request``.

    Contexts repeat across the choices of an item, so each distinct string is encoded once.
    """
    pairs = []  # (context is empty, context, continuation, add special tokens)
    for req in requests:
        if req.context == "":
            pairs.append((True, "", req.continuation, default_add_special_tokens(tokenizer, req.continuation)))
            continue
        # Trailing whitespace of the context belongs to the continuation (lm-eval).
        ctx = req.context.rstrip()
        cont = req.context[len(ctx):] + req.continuation
        pairs.append((False, ctx, cont, default_add_special_tokens(tokenizer, ctx + cont)))
    keys: list[Key] = []
    for empty, ctx, cont, special in pairs:
        keys.extend([(cont, special)] if empty else [(ctx, special), (ctx + cont, special)])
    ids = _batch_encode(tokenizer, keys)
    out = []
    for empty, ctx, cont, special in pairs:
        if empty:
            out.append(([prefix_token_id(tokenizer)], list(ids.get((cont, special), []))))
            continue
        ctx_ids = ids[(ctx, special)]
        out.append((list(ctx_ids), list(ids[(ctx + cont, special)][len(ctx_ids):])))
    return out

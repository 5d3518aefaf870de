"""lm-eval tokenisation of many requests at once (one batched tokenizer call per list)."""

from __future__ import annotations

from typing import Any, Sequence

from ..api import LLRequest, prefix_token_id


def _batch_encode(tokenizer: Any, texts: list[str]) -> dict[str, list[int]]:
    unique = [t for t in dict.fromkeys(texts) if t]
    ids = tokenizer(unique, add_special_tokens=False)["input_ids"] if unique else []
    return {"": [], **dict(zip(unique, ids))}


def encode_requests(tokenizer: Any, requests: Sequence[LLRequest]) -> list[tuple[list[int], list[int]]]:
    """(context ids, continuation ids) per request, equal to ``api.encode_pair`` / ``plain_loglikelihood``.

    Contexts repeat across the choices of an item, so each distinct string is encoded once.
    """
    pairs = []  # (context is empty, context, continuation)
    for req in requests:
        if req.context == "":
            pairs.append((True, "", req.continuation))
            continue
        # Trailing whitespace of the context belongs to the continuation (lm-eval).
        ctx = req.context.rstrip()
        pairs.append((False, ctx, req.context[len(ctx):] + req.continuation))
    texts = [c for _, c, _ in pairs] + [c + k for empty, c, k in pairs if not empty] + [k for empty, _, k in pairs if empty]
    ids = _batch_encode(tokenizer, texts)
    out = []
    for empty, ctx, cont in pairs:
        if empty:
            out.append(([prefix_token_id(tokenizer)], list(ids[cont])))
            continue
        ctx_ids = ids[ctx]
        out.append((list(ctx_ids), list(ids[ctx + cont][len(ctx_ids):])))
    return out

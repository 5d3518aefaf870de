"""Greedy generation in token-budget batches; rows leave the batch as soon as they stop."""

from __future__ import annotations

from typing import Any, Sequence

from ..api import GenRequest, cut_at_stop
from ..backends.hf import default_add_special_tokens, prefix_token_id


def context_ids(tokenizer: Any, requests: Sequence[GenRequest], max_length: int) -> list[list[int]]:
    """Context tokens as lm-eval feeds them (special tokens unless the text starts with BOS),
    left-truncated to leave room for the answer."""
    flags = [default_add_special_tokens(tokenizer, r.context) for r in requests]
    encoded: list[list[int]] = [[] for _ in requests]
    for special in (False, True):
        rows = [i for i, f in enumerate(flags) if f is special]
        if rows:
            for i, ids in zip(rows, tokenizer([requests[i].context for i in rows], add_special_tokens=special)["input_ids"]):
                encoded[i] = ids
    out = []
    for req, ids in zip(requests, encoded):
        ids = list(ids) or [prefix_token_id(tokenizer)]
        out.append(ids[-max(1, max_length - req.max_new_tokens):])
    return out


def _batches(order: list[int], lengths: list[int], new_tokens: list[int], budget: int) -> list[list[int]]:
    """Consecutive groups of ``order`` (longest first) whose padded size fits ``budget``."""
    batches: list[list[int]] = []
    cur: list[int] = []
    width = 0
    for i in order:
        w = max(width, lengths[i] + new_tokens[i])
        if cur and w * (len(cur) + 1) > budget:
            batches.append(cur)
            cur, w = [], lengths[i] + new_tokens[i]
        cur.append(i)
        width = w
    if cur:
        batches.append(cur)
    return batches


def generate_greedy(model: Any, tokenizer: Any, requests: Sequence[GenRequest], max_length: int, max_batch_tokens: int, device: Any, progress: bool = False) -> list[str]:
    ctx = context_ids(tokenizer, requests, max_length)
    order = sorted(range(len(requests)), key=lambda i: -len(ctx[i]))
    new_tokens = [r.max_new_tokens for r in requests]
    batches = _batches(order, [len(c) for c in ctx], new_tokens, max_batch_tokens)
    out = [""] * len(requests)
    if progress:
        from tqdm import tqdm

        batches = tqdm(batches, desc="generating", unit="batch")
    for batch in batches:
        for i, text in zip(batch, _generate_batch(model, tokenizer, [ctx[i] for i in batch], [requests[i] for i in batch], device)):
            out[i] = text
    return out


def _generate_batch(model: Any, tokenizer: Any, contexts: list[list[int]], requests: list[GenRequest], device: Any) -> list[str]:
    import torch
    from transformers import DynamicCache

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    eos = tokenizer.eos_token_id
    width = max(len(c) for c in contexts)
    # Left padding: every row's next token is at the last column.
    ids = torch.tensor([[pad] * (width - len(c)) + c for c in contexts], device=device)
    attn = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts], device=device)
    pos = (attn.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache(config=model.config)
    generated: list[list[int]] = [[] for _ in contexts]
    windows = [4 * max((len(s) for s in r.stop), default=0) + 4 for r in requests]
    active = list(range(len(contexts)))  # request index of each live row
    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=attn, position_ids=pos, past_key_values=cache, use_cache=True, logits_to_keep=1).logits
        last_pos = pos[:, -1]
        while True:
            nxt = logits[:, -1].argmax(dim=-1)
            keep = []
            for row, (i, tok) in enumerate(zip(active, nxt.tolist())):
                req = requests[i]
                if tok == eos:
                    continue
                generated[i].append(tok)
                # Stop strings are checked on the fly, so a finished row leaves the batch now.
                # A new occurrence ends in the last token and spans at most 4 tokens per
                # character (byte-level pieces), so decoding that tail is enough.
                tail = tokenizer.decode(generated[i][-windows[i]:], skip_special_tokens=True)
                if len(generated[i]) >= req.max_new_tokens or any(s and s in tail for s in req.stop):
                    continue
                keep.append(row)
            if not keep:
                break
            if len(keep) < len(active):
                sel = torch.tensor(keep, device=device)
                cache.batch_select_indices(sel)
                attn, nxt, last_pos = attn[sel], nxt[sel], last_pos[sel]
                active = [active[r] for r in keep]
            attn = torch.cat([attn, torch.ones_like(attn[:, :1])], dim=1)
            last_pos = last_pos + 1
            logits = model(input_ids=nxt[:, None], attention_mask=attn, position_ids=last_pos[:, None], past_key_values=cache, use_cache=True).logits
    return [cut_at_stop(tokenizer.decode(g, skip_special_tokens=True), r.stop) for g, r in zip(generated, requests)]

"""The token budget of one forward pass: a CPU default, or probed once on a CUDA device."""

from __future__ import annotations

from typing import Any

from ..backend_support.memory import CPU_PASS_TOKENS, kv_bytes_per_token

DEFAULT_MAX_BATCH_TOKENS = CPU_PASS_TOKENS
# Generation on CPU: a decoding step costs little more with more rows (its operations
# are small), so a batch is as wide as its key/value cache allows: this many bytes of
# cache (float32 Llama-8B: 16384 tokens), at most GEN_TOKENS_CEILING_CPU tokens.
GEN_CACHE_BYTES_CPU = 4 << 30
GEN_TOKENS_CEILING_CPU = 65536
# A packed tree attends densely over its nodes (cost: its size squared); 256 nodes hold
# an item's context and choices (a longer context may exceed it, see tree.pack_trees).
DEFAULT_MAX_TREE_TOKENS = 256


def cpu_gen_budget(model: Any, max_length: int) -> int:
    """Tokens (rows x (context + new tokens)) of one generation batch on CPU: what fits in
    ``GEN_CACHE_BYTES_CPU`` of cache, between ``max_length`` and ``GEN_TOKENS_CEILING_CPU``."""
    return max(max_length, min(GEN_TOKENS_CEILING_CPU, GEN_CACHE_BYTES_CPU // kv_bytes_per_token(model)))


def _fits(model: Any, n_tokens: int) -> bool:
    """One worst-case pass of ``n_tokens``: a causal chain, logits at every position."""
    import torch

    dev = model.device
    try:
        with torch.inference_mode():
            ids = torch.zeros((1, n_tokens), dtype=torch.long, device=dev)
            pos = torch.arange(n_tokens, device=dev)[None]
            mask = torch.ones((n_tokens, n_tokens), dtype=torch.bool, device=dev).tril()[None, None]
            logits = model(input_ids=ids, position_ids=pos, attention_mask=mask, use_cache=False).logits
            torch.log_softmax(logits.float(), dim=-1)
            torch.cuda.synchronize(dev)
        return True
    except torch.cuda.OutOfMemoryError:
        return False
    finally:
        torch.cuda.empty_cache()


def probe_max_batch_tokens(model: Any, max_length: int, ceiling: int = 1 << 16, safety: float = 0.85) -> int:
    """The largest budget (a multiple of ``max_length``, times ``safety``) whose worst-case pass fits.

    Runs once at start-up instead of retrying batches after an out-of-memory error.
    Doubles from ``max_length`` until a pass fails or ``ceiling`` is reached, then bisects.
    """
    if model.device.type != "cuda":
        return DEFAULT_MAX_BATCH_TOKENS
    if not _fits(model, max_length):
        raise RuntimeError(f"one sequence of max_length={max_length} tokens does not fit on {model.device}")
    lo, hi = max_length, max_length * 2
    while hi <= ceiling and _fits(model, hi):
        lo, hi = hi, hi * 2
    hi = min(hi, ceiling + 1)
    while hi - lo > max_length // 4:
        mid = (lo + hi) // 2
        if _fits(model, mid):
            lo = mid
        else:
            hi = mid
    return max(max_length, int(lo * safety))

"""Reference greedy generation: one request at a time, ``model.generate``, cut at the stop strings."""

from __future__ import annotations

from typing import Any, Sequence

from ..api import GenRequest
from .generate import context_ids, cut_at_stop


def plain_generate_until(model: Any, tokenizer: Any, requests: Sequence[GenRequest], max_length: int) -> list[str]:
    import torch

    out = []
    with torch.inference_mode():
        for req, ctx in zip(requests, context_ids(tokenizer, requests, max_length)):
            ids = torch.tensor([ctx], device=model.device)
            seq = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=req.max_new_tokens,
                do_sample=False,
                eos_token_id=tokenizer.eos_token_id,
                pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
            )
            text = tokenizer.decode(seq[0, len(ctx):].tolist(), skip_special_tokens=True)
            out.append(cut_at_stop(text, req.stop))
    return out

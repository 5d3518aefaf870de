"""lm-eval tokenisation of many requests at once: the rules of eval/backend_support/tokenization.py
(``encode_requests``), with the tokenizer called on bounded groups of texts."""

from __future__ import annotations

from typing import Any, Sequence

from ..api import LLRequest
from ..backend_support import tokenization
from ..backend_support.tokenization import Key

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
    """(context ids, continuation ids) per request, equal to ``backend_support.tokenization.encode_request``;
    contexts repeat across the choices of an item, so each distinct string is encoded once."""
    return tokenization.encode_requests(tokenizer, requests, lambda keys: _batch_encode(tokenizer, keys))

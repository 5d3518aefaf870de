"""lm-eval's Hugging Face tokenisation rules that the ``hf`` backend (``backends/hf.py``) and
the fast scorer (``fast/``) both apply; here so that neither package imports the other for them."""

from __future__ import annotations

from typing import Any


def prefix_token_id(tokenizer: Any) -> int:
    """The token lm-eval puts before an empty context (BOS, else EOS)."""
    if tokenizer.bos_token_id is not None:
        return tokenizer.bos_token_id
    return tokenizer.eos_token_id


def default_add_special_tokens(tokenizer: Any, text: str) -> bool:
    """lm-eval's HF rule: the tokenizer's special tokens (e.g. Llama's BOS) are added,
    unless the text already starts with the BOS string (a rendered chat template)."""
    return not text.startswith(tokenizer.decode([prefix_token_id(tokenizer)]))

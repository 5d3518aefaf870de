"""``--backend fast``: shared-prefix log-likelihoods and token-budget batches (``evalita_eval.fast``)
on a model and tokenizer loaded exactly as the ``hf`` backend loads them."""

from __future__ import annotations

from typing import Any

from ..api import Backend, BackendOptions
from ..fast import FastBackend
from . import register_backend
from .hf import OnHFModel, load_hf


@register_backend("fast")
class FastHFBackend(OnHFModel, FastBackend, Backend):
    """Same log-likelihoods as ``hf`` within 1e-6*|LL|+1e-5, same greedy generations (docs/fast.md)."""

    def __init__(self, model: Any, tokenizer: Any, *, max_length: int, max_batch_tokens: int | None = None, name_or_path: str = "") -> None:
        super().__init__(model, tokenizer, max_length=max_length, max_batch_tokens=max_batch_tokens)
        self._identify(name_or_path)

    @classmethod
    def from_options(cls, options: BackendOptions) -> "FastHFBackend":
        loaded = load_hf(options)
        return cls(loaded.model, loaded.tokenizer, max_length=loaded.max_length, max_batch_tokens=options.max_batch_tokens, name_or_path=options.model)

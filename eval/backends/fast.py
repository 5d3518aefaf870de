"""``--backend fast``: shared-prefix log-likelihoods and token-budget batches (``evalita_eval.fast``)
on a model and tokenizer loaded exactly as the ``hf`` backend loads them.

Constrained generations (``GenRequest.constraint``, ``--constrained``) take the ``hf``
backend's generate path on the same model and tokenizer: it applies the grammar as a
logits processor inside transformers' ``generate`` (eval/settings/constrained.py); the rest keep
the fast path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..api import Backend, BackendOptions, Capabilities, GenRequest, backend_option
from ..fast import FastBackend
from . import register_backend
from ..backend_support.gguf import gguf_file_option
from ..backend_support.options import engine_of
from .hf import HFBackend, OnHFModel
from .hf_loading import load_hf


@dataclass(frozen=True)
class FastOptions:
    # Out of the cache identity: the budget only regroups requests (float rounding; see OnHFModel.cache_identity).
    max_batch_tokens: int | None = backend_option(None, "token budget of one forward pass; default: probed on CUDA, a CPU default otherwise",
                                                  changes_numbers=False, flag="--max-batch-tokens")
    gguf_file: str | None = gguf_file_option()


@register_backend("fast")
class FastHFBackend(OnHFModel, FastBackend, Backend):
    """Same log-likelihoods as ``hf`` within 1e-6*|LL|+1e-5, same greedy generations (docs/fast.md)."""

    capabilities = Capabilities(constrained=True)
    Options = FastOptions

    def __init__(self, model: Any, tokenizer: Any, *, max_length: int, max_batch_tokens: int | None = None, name_or_path: str = "",
                 batch_size: int | None = 8, threads: int | None = None, max_memory: int | None = None) -> None:
        super().__init__(model, tokenizer, max_length=max_length, max_batch_tokens=max_batch_tokens, threads=threads, max_memory=max_memory)
        self._identify(name_or_path)
        # The constrained generate path: the hf backend on this very model and tokenizer.
        self._constrained = HFBackend(model, tokenizer, max_length=max_length, batch_size=batch_size, name_or_path=name_or_path,
                                      max_memory=max_memory)

    @classmethod
    def from_options(cls, options: BackendOptions) -> "FastHFBackend":
        loaded = load_hf(options)
        return cls(loaded.model, loaded.tokenizer, max_length=loaded.max_length, max_batch_tokens=engine_of(cls, options).max_batch_tokens,
                   name_or_path=options.model, batch_size=options.batch_size, threads=options.threads,
                   max_memory=options.max_memory)

    def generate_with_model_cache(self, requests: Sequence[GenRequest], on_result: Callable[[int, str], None] | None = None) -> list[str]:
        """Models whose cache layers cannot be refilled (sliding windows): the hf backend's batched generate."""
        return self._constrained.generate_until(requests, on_result)

    def generate_until(self, requests: Sequence[GenRequest], on_result: Callable[[int, str], None] | None = None) -> list[str]:
        """Free requests on the fast path, constrained ones on the hf path; answers in request
        order, each reported to ``on_result(index, text)`` as it finishes."""
        out: list[str | None] = [None] * len(requests)
        for constrained, path in ((True, self._constrained.generate_until), (False, super().generate_until)):
            idx = [i for i, r in enumerate(requests) if (r.constraint is not None) == constrained]
            if idx:
                report = None if on_result is None else (lambda k, text, idx=idx: on_result(idx[k], text))
                for i, text in zip(idx, path([requests[i] for i in idx], report)):
                    out[i] = text
        return out  # type: ignore[return-value]

"""A vLLM logits processor that forces given continuation tokens (``--backend vllm``, docs/engines.md): a request
with ``SamplingParams.extra_args = {"evalita_force_tokens": [t1, ..., tn]}`` gets -inf for every token but ``t_k`` at
its k-th generated position; requests without the key are left untouched. It imports vLLM: only the engine loads it."""

from __future__ import annotations

from typing import Any

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates

FORCE_KEY = "evalita_force_tokens"  # = backends.vllm_scoring.FORCE_KEY (that module must not import vLLM)


def _forced(params: Any, _prompt: list[int] | None, output: list[int]) -> tuple[list[int], list[int]] | None:
    """A row's state: (the tokens to force, its output tokens: a live reference), or None to leave it alone."""
    tokens = (params.extra_args or {}).get(FORCE_KEY) if params is not None else None
    return None if tokens is None else (tokens, output)


class ForceTokens(LogitsProcessor):
    """Per row of the persistent batch that asks for it: (the forced tokens, the row's output tokens, live)."""

    @classmethod
    def validate_params(cls, params: Any) -> None:
        tokens = (params.extra_args or {}).get(FORCE_KEY)
        if tokens is None:
            return
        valid = isinstance(tokens, list) and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0
                                                 for t in tokens)
        if not valid or not tokens:
            raise ValueError(f"extra_args[{FORCE_KEY!r}] must be a non-empty list of token ids, got {tokens!r}")
        if params.max_tokens != len(tokens):
            raise ValueError(f"extra_args[{FORCE_KEY!r}] forces {len(tokens)} tokens but max_tokens is "
                             f"{params.max_tokens}")

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        self.rows: dict[int, tuple[list[int], list[int]]] = {}

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token greedy sampling takes

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        # vLLM's own bookkeeping of sparse per-row state (added, removed, moved rows).
        process_dict_updates(self.rows, batch_update, _forced)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        forced = [(row, tokens[len(out)]) for row, (tokens, out) in self.rows.items() if len(out) < len(tokens)]
        if forced:
            rows = torch.tensor([row for row, _ in forced], device=logits.device)
            cols = torch.tensor([token for _, token in forced], device=logits.device)
            logits[rows] = float("-inf")
            logits[rows, cols] = 0.0  # finite whatever a processor before did to it; sampling only
        return logits

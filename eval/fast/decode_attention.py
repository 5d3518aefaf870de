"""Decoding-step attention over each group of rows' own key range, not the batch's padded one.

Rows of a continuous batch are left-padded to its longest context: with summaries
(~600 tokens) and NER sentences (~150) in one batch, half the keys and values a short
row's step reads are padding, and a decoding step's attention is bound by those reads.
Here contiguous runs of rows with a similar first real column attend to the columns
from that column on (views: no copy), one ``sdpa`` call per run. The masked columns
left out carried zero weight, so the result is that attention's, up to float rounding
(the kernel's blocks start elsewhere); it is closer to a request run alone.

Used only for one-token steps with a ready-made 4D mask (``generate._Rows.step``), by
setting the model's attention implementation to ``NAME`` for that call.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "evalita_row_groups"
# (first row, end row, first column) of each run, for the call in progress.
_RUNS: ContextVar[list[tuple[int, int, int]] | None] = ContextVar("evalita_row_groups", default=None)


def _attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: Any, **kwargs: Any):
    runs = _RUNS.get()
    if runs is None or query.shape[2] != 1 or attention_mask is None or attention_mask.dim() != 4:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    outs = [sdpa_attention_forward(module, query[a:b], key[a:b, :, c:], value[a:b, :, c:], attention_mask[a:b, :, :, c:], **kwargs)[0]
            for a, b, c in runs]
    return torch.cat(outs), None


AttentionInterface.register(NAME, _attention)


def row_runs(starts: list[int], width: int, max_runs: int = 4) -> list[tuple[int, int, int]] | None:
    """Runs ``(first row, end row, first column)`` of rows whose first real column is ``starts[row]``,
    or None when one call over all columns from the earliest start is as good.

    A run ends where a row starts more than ``max(32, width // 8)`` columns away from the
    run's first row; a run reads from its earliest start. None when that leaves more than
    ``max_runs`` runs (calls cost too) or saves less than a fifth of the columns read.
    """
    tolerance = max(32, width // 8)
    runs: list[list[int]] = []
    for row, start in enumerate(starts):
        if runs and abs(start - starts[runs[-1][0]]) <= tolerance:
            runs[-1][1] = row + 1
            runs[-1][2] = min(runs[-1][2], start)
        else:
            runs.append([row, row + 1, start])
    if len(runs) < 2 or len(runs) > max_runs:
        return None
    grouped = sum((b - a) * (width - c) for a, b, c in runs)
    if 5 * grouped > 4 * len(starts) * (width - min(starts)):
        return None
    return [(a, b, c) for a, b, c in runs]


@contextmanager
def grouped_attention(model: Any, runs: list[tuple[int, int, int]]) -> Iterator[None]:
    """Within: ``model``'s sdpa attention runs per run of rows (its config is restored after)."""
    config = model.config
    before = config._attn_implementation
    token = _RUNS.set(runs)
    config._attn_implementation = NAME
    try:
        yield
    finally:
        config._attn_implementation = before
        _RUNS.reset(token)

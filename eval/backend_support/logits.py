"""Where a causal model's logits are read for scoring: the kept positions only (``logits_at``), and the plain linear
output layer when there is one (``plain_head``). Used by the ``hf`` backend (``backends/hf.py``)."""

from __future__ import annotations

from typing import Any


def logits_at(model: Any, keep: Any, **inputs: Any) -> Any:
    """The logits of the True positions of ``keep`` (rows x width), (n, vocab) in row-major order, from one forward
    pass of ``inputs``. Where the model takes a boolean ``logits_to_keep`` (transformers 5), only those positions
    reach the vocabulary projection (the full logits' values up to float rounding: the matrix kernel's blocks depend
    on the row count), never the (rows x width x vocab) matrix; other models compute every position and are sliced."""
    import inspect

    n_kept = int(keep.sum())
    if getattr(model, "_evalita_keep_mask", None) is None:
        model._evalita_keep_mask = "logits_to_keep" in inspect.signature(model.forward).parameters
    if model._evalita_keep_mask:
        try:
            logits = model(**inputs, logits_to_keep=keep, use_cache=False).logits
        except IndexError:  # a model that slices positions with an int or a 1-D index only
            logits = None
        if logits is not None and tuple(logits.shape[:-1]) == (n_kept,):
            return logits
        model._evalita_keep_mask = False
    return model(**inputs, use_cache=False).logits[keep]


def plain_head(model: Any) -> Any:
    """The output layer when logits are exactly ``head(last hidden state)``, else None."""
    import torch

    head = model.get_output_embeddings()
    config = model.config
    # Soft-capped or scaled logits (Gemma 2, Cohere...) need the model's own forward.
    for attr in ("final_logit_softcapping", "logit_scale", "logits_scaling", "output_multiplier_scale"):
        if getattr(config, attr, None) not in (None, 1, 1.0):
            return None
    if not isinstance(head, torch.nn.Linear) or not hasattr(model, "get_decoder"):
        return None
    return head

"""A key/value cache that grows in place: a decoding step writes one column, it does not copy the cache.

``DynamicLayer.update`` concatenates the new keys and values to the old ones, which
copies the whole cache of every layer at every step: on CPU, with long contexts
(summaries), that copy costs as much as the step's attention. Imported by
``generate`` when it runs (transformers is not imported on backend discovery).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose keys and values are views of buffers with spare columns.

    A step writes its column into the spare room. When the views were replaced (rows
    selected, batches joined, padding columns dropped: ``generate._Rows``), the next
    update adopts the new tensors into fresh buffers: one copy per such event, not per
    step. Values are the same tensors ``DynamicLayer`` would hold, element for element.
    """

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = self.keys.shape[-2] if self.keys.dim() == 4 else 0
        end = n + key_states.shape[-2]
        buf = getattr(self, "_buffers", None)
        ours = buf is not None and self.keys.data_ptr() == buf[0].data_ptr() and self.keys.shape[:2] == buf[0].shape[:2]
        if not ours or end > buf[0].shape[-2]:
            # Room for a quarter more, at least 64 columns: a row grows by its new tokens only.
            room = end + max(64, end // 4)
            buf = (key_states.new_empty((*key_states.shape[:2], room, key_states.shape[-1])),
                   value_states.new_empty((*value_states.shape[:2], room, value_states.shape[-1])))
            if n:
                buf[0][..., :n, :] = self.keys
                buf[1][..., :n, :] = self.values
            self._buffers = buf
        buf[0][..., n:end, :] = key_states
        buf[1][..., n:end, :] = value_states
        self.keys, self.values = buf[0][..., :end, :], buf[1][..., :end, :]
        return self.keys, self.values


def growing_cache(config: Any) -> DynamicCache:
    """A ``DynamicCache`` for ``config`` whose plain layers are :class:`GrowingLayer` (others stay as they are)."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


def refillable(config: Any) -> bool:
    """Whether every layer of ``config`` keeps plain full-attention keys and values (no sliding
    window, no other cache kind): the caches that continuous batching can select and join."""
    return all(type(layer) is DynamicLayer for layer in DynamicCache(config=config).layers)

"""Greedy generation with continuous batching: a finished row is refilled at once.

Requests are taken longest context first. A batch of live rows shares one KV cache
(left-padded, every row's next token in the last column); after every step the rows
that stopped leave it and waiting requests take their places: their contexts are run
in one batched forward pass and their caches joined to the live one (left-padded to a
common length). So the batch stays full until the queue is empty, instead of waiting
for its slowest row. Stop strings are checked after every token on the decoded tail of
the row (a new occurrence must end in the last token), so a row leaves as soon as it
stops. ``rows x (longest context + max new tokens) <= budget`` bounds a batch.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Sequence

from ..api import GenRequest, cut_at_stop, prompt_room
from ..backends.hf import default_add_special_tokens, prefix_token_id


def context_ids(tokenizer: Any, requests: Sequence[GenRequest], max_length: int) -> list[list[int]]:
    """Context tokens as lm-eval feeds them (special tokens unless the text starts with BOS),
    left-truncated to leave room for the answer."""
    flags = [default_add_special_tokens(tokenizer, r.context) for r in requests]
    encoded: list[list[int]] = [[] for _ in requests]
    for special in (False, True):
        rows = [i for i, f in enumerate(flags) if f is special]
        if rows:
            for i, ids in zip(rows, tokenizer([requests[i].context for i in rows], add_special_tokens=special)["input_ids"]):
                encoded[i] = ids
    out = []
    for req, ids in zip(requests, encoded):
        ids = list(ids) or [prefix_token_id(tokenizer)]
        out.append(ids[-prompt_room(max_length, req.max_new_tokens):])
    return out


class _Rows:
    """The live rows of one continuous batch: their cache, attention mask, positions, outputs."""

    def __init__(self, model: Any, tokenizer: Any, requests: Sequence[GenRequest], device: Any) -> None:
        self.model, self.tokenizer, self.requests, self.device = model, tokenizer, requests, device
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos = tokenizer.eos_token_id
        self.ids: list[int] = []  # request index of each row
        self.cache: Any = None
        self.attn: Any = None  # (rows, cache length + 1): 1 where a row has a token
        self.last_pos: Any = None  # (rows,) position of each row's last token
        self.next_tokens: Any = None  # (rows,) the token each row feeds next
        self.generated: dict[int, list[int]] = {}
        # A new stop-string occurrence ends in the last token and spans at most 4 tokens per
        # character (byte-level pieces), so decoding that tail is enough.
        self.windows = [4 * max((len(s) for s in r.stop), default=0) + 4 for r in requests]

    def __len__(self) -> int:
        return len(self.ids)

    def can_refill(self) -> bool:
        """Whether caches can be joined: plain per-layer key/value tensors (no sliding windows)."""
        from transformers.cache_utils import DynamicLayer

        return self.cache is None or all(type(layer) is DynamicLayer for layer in self.cache.layers)

    def admit(self, new: list[int], contexts: list[list[int]]) -> list[int]:
        """Run the contexts of requests ``new`` and join them to the batch; returns the finished ones."""
        import torch
        from transformers import DynamicCache

        width = max(len(contexts[i]) for i in new)
        ids = torch.tensor([[self.pad] * (width - len(contexts[i])) + contexts[i] for i in new], device=self.device)
        attn = torch.tensor([[0] * (width - len(contexts[i])) + [1] * len(contexts[i]) for i in new], device=self.device)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=self.model.config)
        with torch.inference_mode():
            logits = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, past_key_values=cache, use_cache=True, logits_to_keep=1).logits
        for i in new:
            self.generated[i] = []
        if self.cache is None:
            self.ids, self.cache, self.attn, self.last_pos = list(new), cache, attn, pos[:, -1]
        else:
            self._join(new, cache, attn, pos[:, -1])
        return self._take(logits[:, -1], first_row=len(self.ids) - len(new))

    def step(self) -> list[int]:
        """One token for every live row; returns the requests that finished."""
        import torch

        self.attn = torch.cat([self.attn, torch.ones_like(self.attn[:, :1])], dim=1)
        self.last_pos = self.last_pos + 1
        with torch.inference_mode():
            logits = self.model(
                input_ids=self.next_tokens[:, None], attention_mask=self.attn, position_ids=self.last_pos[:, None],
                past_key_values=self.cache, use_cache=True,
            ).logits
        return self._take(logits[:, -1], first_row=0)

    def _take(self, logits: Any, first_row: int) -> list[int]:
        """Greedy tokens for the rows from ``first_row`` on (one per row of ``logits``); the rows
        that stopped (end of sequence, a stop string, ``max_new_tokens``) leave the batch."""
        import torch

        chosen = logits.argmax(dim=-1)
        finished, keep = [], list(range(first_row))
        for row, tok in enumerate(chosen.tolist(), first_row):
            i = self.ids[row]
            req, gen = self.requests[i], self.generated[i]
            if tok != self.eos:
                gen.append(tok)
                tail = self.tokenizer.decode(gen[-self.windows[i]:], skip_special_tokens=True)
                if len(gen) < req.max_new_tokens and not any(s and s in tail for s in req.stop):
                    keep.append(row)
                    continue
            finished.append(i)
        self.next_tokens = torch.cat([self.next_tokens, chosen]) if first_row else chosen
        if len(keep) < len(self.ids):
            self._select(keep)
        return finished

    def _select(self, keep: list[int]) -> None:
        import torch

        self.ids = [self.ids[r] for r in keep]
        if not keep:
            self.cache = self.attn = self.last_pos = self.next_tokens = None
            return
        sel = torch.tensor(keep, device=self.device)
        self.cache.batch_select_indices(sel)
        self.attn, self.last_pos, self.next_tokens = self.attn[sel], self.last_pos[sel], self.next_tokens[sel]
        # Columns no live row uses any more (left padding of rows that left) are dropped.
        first = int(self.attn.any(dim=0).int().argmax())
        if first:
            self.attn = self.attn[:, first:]
            for layer in self.cache.layers:
                layer.keys, layer.values = layer.keys[..., first:, :], layer.values[..., first:, :]

    def _join(self, new: list[int], cache: Any, attn: Any, last_pos: Any) -> None:
        """Append rows with their own cache: both left-padded to one length, then stacked."""
        import torch

        length = max(self.attn.shape[1], attn.shape[1])

        def left_pad(t: Any, dim: int) -> Any:
            missing = length - t.shape[dim]
            if not missing:
                return t
            shape = list(t.shape)
            shape[dim] = missing
            return torch.cat([t.new_zeros(shape), t], dim=dim)

        for mine, theirs in zip(self.cache.layers, cache.layers):
            mine.keys = torch.cat([left_pad(mine.keys, -2), left_pad(theirs.keys, -2)])
            mine.values = torch.cat([left_pad(mine.values, -2), left_pad(theirs.values, -2)])
        self.attn = torch.cat([left_pad(self.attn, 1), left_pad(attn, 1)])
        self.last_pos = torch.cat([self.last_pos, last_pos])
        self.ids = self.ids + list(new)


def _admissible(waiting: deque, live: list[int], need: list[int], budget: int) -> list[int]:
    """The waiting requests (in order) that join the live rows within the budget; never none into an empty batch."""
    width = max((need[i] for i in live), default=0)
    new: list[int] = []
    while waiting:
        w = max(width, need[waiting[0]])
        rows = len(live) + len(new) + 1
        if rows > 1 and rows * w > budget:
            break
        width = w
        new.append(waiting.popleft())
    return new


def generate_greedy(model: Any, tokenizer: Any, requests: Sequence[GenRequest], max_length: int, max_batch_tokens: int, device: Any, progress: bool = False) -> list[str]:
    """Greedy continuations of every request, cut at its first stop string."""
    contexts = context_ids(tokenizer, requests, max_length)
    waiting = deque(sorted(range(len(requests)), key=lambda i: -len(contexts[i])))
    need = [len(c) + r.max_new_tokens for c, r in zip(contexts, requests)]
    rows = _Rows(model, tokenizer, requests, device)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(requests), desc="generating", unit="req")
    while waiting or len(rows):
        refill = not len(rows) or rows.can_refill()
        new = _admissible(waiting, rows.ids, need, max_batch_tokens) if refill else []
        finished = rows.admit(new, contexts) if new else rows.step()
        if bar is not None:
            bar.update(len(finished))
    if bar is not None:
        bar.close()
    return [cut_at_stop(tokenizer.decode(rows.generated[i], skip_special_tokens=True), r.stop) for i, r in enumerate(requests)]

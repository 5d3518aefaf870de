"""Greedy generation with continuous batching: a finished row is refilled at once.

Requests are taken longest context first. A batch of live rows shares one KV cache
(left-padded, every row's next token in the last column); after every step the rows
that stopped leave it and waiting requests take their places: their contexts are run
in one batched forward pass and their caches joined to the live one (left-padded to a
common length). So the batch stays full until the queue is empty, instead of waiting
for its slowest row. With nobody waiting, a stopped row stays in the batch, dead,
until a quarter of it is (removing rows copies the whole cache). Stop strings are
checked after every token on the decoded tail of the row (a new occurrence must end in
the last token), so a row stops as soon as its text does. ``rows x (longest context + max new tokens) <= budget`` bounds a batch.

Per step, only what changes is touched: each layer's keys and values live in a buffer
with room to grow (:class:`kvcache.GrowingLayer`), so a step writes one column instead of
copying the whole cache; the stop-string tails of all rows are decoded in one batched
tokenizer call; contexts of very different lengths are prefilled in separate passes
(left padding to the longest would waste the difference), and at each step rows of
very different lengths attend to their own columns only (``decode_attention``).
"""

from __future__ import annotations

from collections import deque
from contextlib import nullcontext
from typing import Any, Callable, Sequence

from ..api import GenRequest, cut_at_stop, prompt_room
from ..backend_support.tokenization import default_add_special_tokens, prefix_token_id


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


def tail_decoder(tokenizer: Any) -> Callable[[list[list[int]]], list[str]]:
    """``tokenizer.decode(ids, skip_special_tokens=True)`` for many token lists at once.

    Where that decode is exactly the Rust tokenizer's (a fast tokenizer that does not
    override ``_decode`` and cleans up no spaces), one ``decode_batch`` call replaces a
    Python call per row and step; any other tokenizer decodes row by row.
    """
    from transformers.tokenization_utils_tokenizers import TokenizersBackend
    backend = getattr(tokenizer, "_tokenizer", None)
    if (isinstance(tokenizer, TokenizersBackend) and type(tokenizer)._decode is TokenizersBackend._decode
            and not tokenizer.clean_up_tokenization_spaces and hasattr(backend, "decode_batch")):
        return lambda seqs: backend.decode_batch(seqs, skip_special_tokens=True)
    return lambda seqs: [tokenizer.decode(ids, skip_special_tokens=True) for ids in seqs]


class _Rows:
    """The live rows of one continuous batch: their cache, attention mask, positions, outputs."""

    def __init__(self, model: Any, tokenizer: Any, requests: Sequence[GenRequest], device: Any) -> None:
        self.model, self.tokenizer, self.requests, self.device = model, tokenizer, requests, device
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos = tokenizer.eos_token_id
        self.ids: list[int | None] = []  # request index of each row; None: dead (stopped, not yet removed)
        self.cache: Any = None
        self.attn: Any = None  # (rows, cache length + 1): 1 where a row has a token
        self.last_pos: Any = None  # (rows,) position of each row's last token
        self.next_tokens: Any = None  # (rows,) the token each row feeds next
        self.generated: dict[int, list[int]] = {}
        # A new stop-string occurrence ends in the last token and spans at most 4 tokens per
        # character (byte-level pieces), so decoding that tail is enough.
        self.windows = [4 * max((len(s) for s in r.stop), default=0) + 4 for r in requests]
        self.decode_tails = tail_decoder(tokenizer)

    def __len__(self) -> int:
        """The live rows (dead ones stopped and wait for :meth:`compact`)."""
        return len(self.ids) - self.ids.count(None)

    def admit(self, new: list[int], contexts: list[list[int]]) -> list[int]:
        """Run the contexts of requests ``new`` and join them to the batch; returns the finished ones."""
        import torch

        from .kvcache import growing_cache

        last_logits = []
        for group in prefill_groups([len(contexts[i]) for i in new]):
            rows = [new[g] for g in group]
            width = max(len(contexts[i]) for i in rows)
            ids = torch.tensor([[self.pad] * (width - len(contexts[i])) + contexts[i] for i in rows], device=self.device)
            attn = torch.tensor([[0] * (width - len(contexts[i])) + [1] * len(contexts[i]) for i in rows], device=self.device)
            pos = (attn.cumsum(-1) - 1).clamp(min=0)
            cache = growing_cache(self.model.config)
            with torch.inference_mode():
                logits = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, past_key_values=cache, use_cache=True, logits_to_keep=1).logits
            last_logits.append(logits[:, -1])
            for i in rows:
                self.generated[i] = []
            if self.cache is None:
                self.ids, self.cache, self.attn, self.last_pos = list(rows), cache, attn, pos[:, -1]
            else:
                self._join(rows, cache, attn, pos[:, -1])
        return self._take(torch.cat(last_logits), first_row=len(self.ids) - len(new))

    def step(self) -> list[int]:
        """One token for every live row; returns the requests that finished."""
        import torch

        self.attn = torch.cat([self.attn, torch.ones_like(self.attn[:, :1])], dim=1)
        self.last_pos = self.last_pos + 1
        from . import decode_attention

        mask, runs = self.attn, None
        implementation = getattr(self.model.config, "_attn_implementation", None)
        if implementation in ("sdpa", "eager"):
            # Full attention in every layer (generate_greedy's precondition): the one-query mask
            # ready for attention. An additive float mask is used as is by every layer; from
            # the 0/1 mask, transformers would build a boolean one that each layer converts again.
            dtype = self.model.dtype
            mask = torch.zeros((len(self.ids), 1, 1, self.attn.shape[1]), dtype=dtype, device=self.device)
            mask.masked_fill_((self.attn == 0)[:, None, None], torch.finfo(dtype).min)
            if implementation == "sdpa":  # first real column of each row
                runs = decode_attention.row_runs(self.attn.argmax(dim=1).tolist(), self.attn.shape[1])
        grouped = nullcontext() if runs is None else decode_attention.grouped_attention(self.model, runs)
        with torch.inference_mode(), grouped:
            logits = self.model(
                input_ids=self.next_tokens[:, None], attention_mask=mask, position_ids=self.last_pos[:, None],
                past_key_values=self.cache, use_cache=True,
            ).logits
        return self._take(logits[:, -1], first_row=0)

    def _take(self, logits: Any, first_row: int) -> list[int]:
        """Greedy tokens for the live rows from ``first_row`` on (one per row of ``logits``); returns
        the requests that stopped (end of sequence, a stop string, ``max_new_tokens``). Their
        rows stay in the batch, dead, until :meth:`compact` removes them."""
        import torch

        chosen = logits.argmax(dim=-1)
        finished, going = [], []  # going: rows that took a token below their budget (their stop strings decide)
        for row, tok in enumerate(chosen.tolist(), first_row):
            i = self.ids[row]
            if i is None:  # dead
                continue
            gen = self.generated[i]
            if tok != self.eos:
                gen.append(tok)
                if len(gen) < self.requests[i].max_new_tokens:
                    going.append(row)
                    continue
            finished.append(row)
        checked = [row for row in going if any(self.requests[self.ids[row]].stop)]
        # One batched decode of every checked row's tail (a new occurrence ends in its last token).
        tails = self.decode_tails([self.generated[self.ids[row]][-self.windows[self.ids[row]]:] for row in checked]) if checked else []
        finished += [row for row, tail in zip(checked, tails) if any(s and s in tail for s in self.requests[self.ids[row]].stop)]
        self.next_tokens = torch.cat([self.next_tokens, chosen]) if first_row else chosen
        done = [self.ids[row] for row in finished]
        for row in finished:
            self.ids[row] = None
        return done

    def compact(self, force: bool) -> None:
        """Remove the dead rows when ``force`` (requests wait to join), when they are a quarter
        of the batch or more, or when no row lives. Removing rows copies the whole cache, so
        a row that stops while nothing waits stays (masked work) until then."""
        dead = self.ids.count(None)
        if dead and (force or 4 * dead >= len(self.ids) or dead == len(self.ids)):
            self._select([row for row, i in enumerate(self.ids) if i is not None])

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


def prefill_groups(lengths: list[int], slack: float = 1.5) -> list[list[int]]:
    """Positions of ``lengths`` (longest first) split into runs prefilled together: a run ends
    where the next context is shorter than its longest by more than ``slack`` times."""
    groups: list[list[int]] = []
    for k, n in enumerate(lengths):
        if groups and lengths[groups[-1][0]] <= slack * n:
            groups[-1].append(k)
        else:
            groups.append([k])
    return groups


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


def generate_greedy(model: Any, tokenizer: Any, requests: Sequence[GenRequest], max_length: int, max_batch_tokens: int, device: Any, progress: bool = False,
                    on_result: Callable[[int, str], None] | None = None) -> list[str]:
    """Greedy continuations of every request, cut at its first stop string;
    ``on_result(index, text)`` is called for each request at the step it finishes.

    ``model`` keeps plain full-attention keys and values in every layer
    (``kvcache.refillable``; ``FastBackend`` sends other models to the hf path).
    """
    from .kvcache import refillable

    if not refillable(model.config):
        raise ValueError("continuous batching needs plain full-attention cache layers (no sliding windows); use the hf backend's generate")
    contexts = context_ids(tokenizer, requests, max_length)
    waiting = deque(sorted(range(len(requests)), key=lambda i: -len(contexts[i])))
    need = [len(c) + r.max_new_tokens for c, r in zip(contexts, requests)]
    rows = _Rows(model, tokenizer, requests, device)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(requests), desc="generating", unit="req")
    out: list[str | None] = [None] * len(requests)
    while waiting or len(rows):
        new = _admissible(waiting, [i for i in rows.ids if i is not None], need, max_batch_tokens)
        finished = rows.admit(new, contexts) if new else rows.step()
        rows.compact(force=bool(waiting))
        for i in finished:
            out[i] = cut_at_stop(tokenizer.decode(rows.generated[i], skip_special_tokens=True), requests[i].stop)
            if on_result is not None:
                on_result(i, out[i])
        if bar is not None:
            bar.update(len(finished))
    if bar is not None:
        bar.close()
    return out  # type: ignore[return-value]

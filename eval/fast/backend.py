"""``FastBackend``: the Backend protocol over shared-prefix trees and token-budget batches."""

from __future__ import annotations

from typing import Any, Sequence

from ..api import GenRequest, LLRequest, LLResult
from .budget import DEFAULT_MAX_BATCH_TOKENS, DEFAULT_MAX_TREE_TOKENS, probe_max_batch_tokens
from .encode import encode_requests
from .generate import generate_greedy
from .tree import PackedTree, batch_trees, pack_trees


class FastBackend:
    """Exact log-likelihoods and greedy generation, faster than one forward pass per request.

    ``max_batch_tokens`` bounds the padded tokens of one forward pass (rows x longest row:
    prefix trees for scoring, context + new tokens for generation); ``max_tree_tokens``
    bounds one prefix tree, whose attention costs the square of its size. ``None`` probes the largest budget
    that fits on a CUDA device once, here; elsewhere it takes a CPU-friendly default.
    """

    def __init__(self, model: Any, tokenizer: Any, max_length: int = 2048, max_batch_tokens: int | None = None, device: Any = None, max_tree_tokens: int = DEFAULT_MAX_TREE_TOKENS, progress: bool = False):
        import torch
        import transformers

        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.device = torch.device(device) if device is not None else model.device
        if self.model.device != self.device:
            self.model.to(self.device)
        if max_batch_tokens is None:
            if self.device.type == "cuda":
                max_batch_tokens = probe_max_batch_tokens(self.model, max_length)
            else:
                max_batch_tokens = DEFAULT_MAX_BATCH_TOKENS
        # One request of the longest allowed length must fit in a pass.
        self.max_batch_tokens = max(max_batch_tokens, max_length)
        self.max_tree_tokens = max_tree_tokens
        self.progress = progress
        # transformers >= 5 projects only boolean-masked positions onto the vocabulary.
        self._keep_mask_supported = int(transformers.__version__.split(".")[0]) >= 5

    # -- log-likelihoods ---------------------------------------------------------------

    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        pairs = encode_requests(self.tokenizer, requests)
        inputs, targets = [], []
        for req, (ctx, cont) in zip(requests, pairs):
            if not cont:
                raise ValueError(f"continuation {req.continuation!r} encodes to no tokens")
            # Same left truncation as the plain path: the model sees all but the last token.
            inp = (ctx + cont)[-(self.max_length + 1):][:-1]
            if len(inp) < len(cont):
                raise ValueError(f"continuation {req.continuation!r} is longer than max_length={self.max_length} tokens")
            inputs.append(inp)
            targets.append(cont)
        results: list[LLResult | None] = [None] * len(requests)
        batches = batch_trees(pack_trees(inputs, self.max_tree_tokens), self.max_batch_tokens)
        for batch in _progress(batches, self.progress, "scoring"):
            for i, res in self._score_batch(batch, targets):
                results[i] = res
        return results  # type: ignore[return-value]

    def _score_batch(self, trees: list[PackedTree], targets: list[list[int]]) -> list[tuple[int, LLResult]]:
        import numpy as np
        import torch

        width = len(trees[0])
        ids = np.zeros((len(trees), width), dtype=np.int64)
        pos = np.zeros((len(trees), width), dtype=np.int64)
        keep = np.zeros((len(trees), width), dtype=bool)
        for b, tree in enumerate(trees):
            ids[b, : len(tree)] = tree.tokens
            pos[b, : len(tree)] = tree.depth
            for i, path in tree.paths:
                keep[b, path[len(path) - len(targets[i]):]] = True
        mask = np.stack([t.ancestor_mask(width) for t in trees])[:, None]
        # Scored positions in row-major order, as the model returns their logits.
        flat_row = np.full(keep.shape, -1, dtype=np.int64)
        flat_row[keep] = np.arange(int(keep.sum()))
        dev = self.device
        with torch.inference_mode():
            logits = self._logits(
                torch.from_numpy(ids).to(dev), torch.from_numpy(pos).to(dev), torch.from_numpy(mask).to(dev), torch.from_numpy(keep).to(dev)
            )
            # Only the positions whose next token is scored reach the vocabulary projection;
            # log p(target) = logit - logsumexp, without writing out a log-softmax matrix.
            logits = logits.float()
            lse = torch.logsumexp(logits, dim=-1)
            argmax = logits.argmax(dim=-1)
        # One gather for the whole pass, then per-request sums over contiguous slices.
        rows, flat_targets, bounds, owners = [], [], [0], []
        for b, tree in enumerate(trees):
            for i, path in tree.paths:
                cont = targets[i]
                rows.extend(flat_row[b, path[len(path) - len(cont):]].tolist())
                flat_targets.extend(cont)
                bounds.append(len(rows))
                owners.append(i)
        rows_t = torch.tensor(rows, device=dev)
        target_t = torch.tensor(flat_targets, device=dev)
        picked = (logits[rows_t, target_t] - lse[rows_t]).cpu().numpy()
        hits = (argmax[rows_t] == target_t).cpu().numpy()
        return [
            (i, LLResult(float(picked[a:b].sum()), bool(hits[a:b].all()), b - a))
            for i, a, b in zip(owners, bounds[:-1], bounds[1:])
        ]

    def _logits(self, ids, pos, mask, keep):
        """Logits at the ``keep`` positions, (n_kept, vocab), in row-major order."""
        if self._keep_mask_supported:
            return self.model(input_ids=ids, position_ids=pos, attention_mask=mask, logits_to_keep=keep, use_cache=False).logits
        return self.model(input_ids=ids, position_ids=pos, attention_mask=mask, use_cache=False).logits[keep]

    # -- generation ----------------------------------------------------------------------

    def generate_until(self, requests: Sequence[GenRequest]) -> list[str]:
        return generate_greedy(self.model, self.tokenizer, requests, self.max_length, self.max_batch_tokens, self.device, self.progress)


def _progress(items: list, enabled: bool, desc: str):
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit="pass")

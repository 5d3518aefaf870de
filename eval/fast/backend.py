"""``FastBackend``: the Backend protocol over shared-prefix trees and token-budget batches."""

from __future__ import annotations

from typing import Any, Sequence

from ..api import GenRequest, LLRequest, LLResult
from .budget import DEFAULT_MAX_BATCH_TOKENS, probe_max_batch_tokens
from .encode import encode_requests
from .generate import generate_greedy
from .tree import PackedTree, pack_trees


class FastBackend:
    """Exact log-likelihoods and greedy generation, faster than one forward pass per request.

    ``max_batch_tokens`` bounds the tokens of one forward pass (tree nodes for scoring,
    rows x (context + new tokens) for generation). ``None`` probes the largest budget
    that fits on a CUDA device once, here; elsewhere it takes a CPU-friendly default.
    """

    def __init__(self, model: Any, tokenizer: Any, max_length: int = 2048, max_batch_tokens: int | None = None, device: Any = None, progress: bool = False):
        import torch

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
        self.progress = progress

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
        trees = pack_trees(inputs, self.max_batch_tokens)
        for tree in _progress(trees, self.progress, "scoring"):
            for i, res in self._score_tree(tree, targets):
                results[i] = res
        return results  # type: ignore[return-value]

    def _score_tree(self, tree: PackedTree, targets: list[list[int]]) -> list[tuple[int, LLResult]]:
        import torch

        dev = self.device
        # Only the positions whose next token is scored go through the vocabulary projection.
        scored_nodes = sorted({node for i, path in tree.paths for node in path[len(path) - len(targets[i]):]})
        row_of = {node: r for r, node in enumerate(scored_nodes)}
        ids = torch.tensor([tree.tokens], device=dev)
        pos = torch.tensor([tree.depth], device=dev)
        mask = torch.from_numpy(tree.ancestor_mask()).to(dev)[None, None]
        keep = torch.tensor(scored_nodes, device=dev)
        with torch.inference_mode():
            logits = self.model(input_ids=ids, position_ids=pos, attention_mask=mask, logits_to_keep=keep, use_cache=False).logits[0]
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            argmax = logprobs.argmax(dim=-1)
        # One gather for the whole tree, then per-request sums over contiguous slices.
        rows, flat_targets, bounds = [], [], [0]
        for i, path in tree.paths:
            cont = targets[i]
            rows.extend(row_of[n] for n in path[len(path) - len(cont):])
            flat_targets.extend(cont)
            bounds.append(len(rows))
        rows_t = torch.tensor(rows, device=dev)
        target_t = torch.tensor(flat_targets, device=dev)
        picked = logprobs[rows_t, target_t].cpu().numpy()
        hits = (argmax[rows_t] == target_t).cpu().numpy()
        out = []
        for k, (i, _) in enumerate(tree.paths):
            a, b = bounds[k], bounds[k + 1]
            out.append((i, LLResult(float(picked[a:b].sum()), bool(hits[a:b].all()), b - a)))
        return out

    # -- generation ----------------------------------------------------------------------

    def generate_until(self, requests: Sequence[GenRequest]) -> list[str]:
        return generate_greedy(self.model, self.tokenizer, requests, self.max_length, self.max_batch_tokens, self.device, self.progress)


def _progress(items: list, enabled: bool, desc: str):
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit="pass")

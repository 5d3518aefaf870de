"""``FastBackend``: the Backend protocol over shared-prefix trees and token-budget batches."""

from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

from ..api import GenRequest, LLRequest, LLResult, scoring_input
from ..backend_support.logits import logits_at, plain_head
from ..backend_support.memory import kv_bytes_per_token, return_freed_memory, token_bytes
from .budget import DEFAULT_MAX_BATCH_TOKENS, DEFAULT_MAX_TREE_TOKENS, cpu_gen_budget, probe_max_batch_tokens
from .encode import encode_requests
from .generate import generate_greedy
from .tree import PackedTree, batch_trees, pack_trees


# A call's generations are cut into waves of at most this many continuous batches' tokens
# (``FastBackend.generation_waves``): enough to keep a batch full between refills, small enough
# for replicas to share a task's generations.
WAVE_BATCHES = 4


class FastBackend:
    """Exact log-likelihoods and greedy generation, faster than one forward pass per request.

    ``max_batch_tokens`` bounds the padded tokens of one forward pass (rows x longest row:
    prefix trees for scoring, context + new tokens for generation); ``None`` probes the
    largest budget that fits on a CUDA device once, here, and takes a CPU default
    elsewhere (generation on CPU: as wide as 4 GiB of key/value cache, ``budget.cpu_gen_budget``).
    ``max_tree_tokens`` bounds one prefix tree, whose attention costs the
    square of its size. ``progress`` (default: stderr is a terminal) shows tqdm bars.
    ``threads`` (``BackendOptions.threads``) sets torch's intra-op threads; None leaves them.
    """

    # The evaluator hands over this many requests per call (a resume-cache write each):
    # large enough for the choices, prompts and few-shot prefixes of many items to share.
    requests_per_call = 2048

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_length: int = 2048,
        max_batch_tokens: int | None = None,
        device: Any = None,
        max_tree_tokens: int = DEFAULT_MAX_TREE_TOKENS,
        progress: bool | None = None,
        threads: int | None = None,
        max_memory: int | None = None,
    ):
        import torch

        if threads is not None:
            # Process-wide (torch has one intra-op pool). Under contention for the cores,
            # fewer threads than cores avoids waiting on a descheduled worker at every op.
            torch.set_num_threads(threads)

        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.device = torch.device(device) if device is not None else model.device
        if self.model.device != self.device:
            self.model.to(self.device)
        if self.device.type == "cpu":
            return_freed_memory()
        gen_batch_tokens = max_batch_tokens
        if max_batch_tokens is None and max_memory is not None:
            # Scoring: a pass of prefix trees (rows of about max_tree_tokens + 64 nodes, the
            # logits taken in cache-sized chunks); generation: the key/value cache of its tokens.
            max_batch_tokens = max_memory // token_bytes(self.model.config, self.model.dtype.itemsize, max_tree_tokens + 64)
            gen_batch_tokens = max_memory // (kv_bytes_per_token(self.model) + token_bytes(self.model.config, self.model.dtype.itemsize, 1))
        elif max_batch_tokens is None:
            if self.device.type == "cuda":
                max_batch_tokens = gen_batch_tokens = probe_max_batch_tokens(self.model, max_length)
            else:
                max_batch_tokens, gen_batch_tokens = DEFAULT_MAX_BATCH_TOKENS, cpu_gen_budget(self.model, max_length)
        # One request of the longest allowed length must fit in a pass.
        self.max_batch_tokens = max(max_batch_tokens, max_length)
        self.gen_batch_tokens = max(gen_batch_tokens, max_length)
        self.max_tree_tokens = max_tree_tokens
        self.progress = sys.stderr.isatty() if progress is None else progress

    # -- log-likelihoods ---------------------------------------------------------------

    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        pairs = encode_requests(self.tokenizer, requests)
        inputs, targets = [], []
        for req, (ctx, cont) in zip(requests, pairs):
            inputs.append(scoring_input(ctx, cont, self.max_length, req.continuation))
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
        # (scored row, target token) pairs of every request, in request order.
        rows, flat_targets, bounds, owners = [], [], [0], []
        for b, tree in enumerate(trees):
            for i, path in tree.paths:
                cont = targets[i]
                rows.extend(flat_row[b, path[len(path) - len(cont):]].tolist())
                flat_targets.extend(cont)
                bounds.append(len(rows))
                owners.append(i)
        dev = self.device
        with torch.inference_mode():
            allowed = torch.from_numpy(mask).to(dev)
            # An additive float mask is used as is by every attention layer (a boolean one
            # would be converted in each).
            dtype = self.model.dtype
            additive = torch.zeros(allowed.shape, dtype=dtype, device=dev).masked_fill_(~allowed, torch.finfo(dtype).min)
            args = (torch.from_numpy(ids).to(dev), torch.from_numpy(pos).to(dev), additive, torch.from_numpy(keep).to(dev))
            picked, hits = self._target_logprobs(args, torch.tensor(rows, device=dev), torch.tensor(flat_targets, device=dev))
        picked, hits = picked.cpu().numpy(), hits.cpu().numpy()
        return [
            (i, LLResult(float(picked[a:b].sum()), bool(hits[a:b].all()), b - a))
            for i, a, b in zip(owners, bounds[:-1], bounds[1:])
        ]

    def _target_logprobs(self, model_args, rows, targets):
        """log p(target) and target == argmax for each (scored row, target) pair.

        Only the scored positions reach the vocabulary projection. Where the head is a
        plain linear layer, it runs over chunks of rows small enough to stay in cache, and
        log p = logit - logsumexp is taken chunk by chunk: no (rows x vocab) log-softmax
        matrix is ever written out, which is most of the work of a small model.
        """
        import torch

        ids, pos, mask, keep = model_args
        head = plain_head(self.model)
        if head is None:
            logits = logits_at(self.model, keep, input_ids=ids, position_ids=pos, attention_mask=mask)
            return self._pick(logits.float(), 0, rows, targets, torch.arange(len(rows), device=rows.device))
        hidden = self.model.get_decoder()(input_ids=ids, position_ids=pos, attention_mask=mask, use_cache=False).last_hidden_state[keep]
        picked = torch.empty(len(rows), dtype=torch.float32, device=rows.device)
        hits = torch.empty(len(rows), dtype=torch.bool, device=rows.device)
        order = torch.argsort(rows, stable=True)
        sorted_rows = rows[order]
        step = self._chunk_rows(head.weight.shape[0])
        for r0 in range(0, hidden.shape[0], step):
            r1 = min(r0 + step, hidden.shape[0])
            lo, hi = torch.searchsorted(sorted_rows, torch.tensor([r0, r1], device=rows.device)).tolist()
            if lo == hi:
                continue
            sel = order[lo:hi]
            p, h = self._pick(head(hidden[r0:r1]).float(), r0, rows[sel], targets[sel], sel)
            picked[sel], hits[sel] = p, h
        return picked, hits

    @staticmethod
    def _pick(logits, r0, rows, targets, sel):
        local = rows - r0
        mx = logits.amax(dim=-1)
        lse = mx + (logits - mx[:, None]).exp_().sum(dim=-1).log_()
        target_logit = logits[local, targets]
        # The target is greedy iff it is the first maximal index (argmax's tie rule); argmax,
        # slow on CPU, only runs on the rows where the target reaches the maximum.
        hits = target_logit == mx[local]
        if hits.any():
            cand = hits.nonzero()[:, 0]
            hits[cand] = logits[local[cand]].argmax(dim=-1) == targets[cand]
        return target_logit - lse[local], hits

    def _chunk_rows(self, vocab: int) -> int:
        # About 4 MB of float32 logits per chunk on CPU (cache-sized, few ops); 256 MB on a GPU.
        elements = 1 << 20 if self.device.type == "cpu" else 1 << 26
        return max(1, elements // vocab)

    # -- generation ----------------------------------------------------------------------

    def generate_until(self, requests: Sequence[GenRequest], on_result: Callable[[int, str], None] | None = None) -> list[str]:
        """Greedy generations in request order; ``on_result(index, text)`` as each one finishes."""
        if not self.continuous_batching:
            return self.generate_with_model_cache(requests, on_result)
        out: list[str | None] = [None] * len(requests)
        for wave in self.generation_waves(requests):
            report = None if on_result is None else (lambda k, text, wave=wave: on_result(wave[k], text))
            texts = generate_greedy(self.model, self.tokenizer, [requests[i] for i in wave], self.max_length, self.gen_batch_tokens,
                                    self.device, self.progress, report)
            for i, text in zip(wave, texts):
                out[i] = text
        return out  # type: ignore[return-value]

    @property
    def continuous_batching(self) -> bool:
        """Whether free generations take the continuous batches (``generate_greedy``); else the model's
        cache layers cannot be refilled (sliding windows...): transformers' own cache and masks."""
        from .kvcache import refillable

        return refillable(self.model.config)

    def generation_waves(self, requests: Sequence[GenRequest]) -> list[list[int]]:
        """The waves ``generate_until`` runs ``requests`` in (indices, each wave in request order):
        longest context first, a wave closed where its counted tokens (context + new-token limit)
        would pass ``WAVE_BATCHES x gen_batch_tokens``. Each wave is its own continuous batch, so a
        request's numbers depend on its wave alone, never on the rest of the call: data-parallel
        replicas (eval/replicas/plan.py) run whole waves and give the numbers of one process. A wave
        cut again is itself."""
        from .generate import context_ids

        need = [len(ids) + r.max_new_tokens for ids, r in zip(context_ids(self.tokenizer, requests, self.max_length), requests)]
        budget = WAVE_BATCHES * self.gen_batch_tokens
        waves: list[list[int]] = []
        tokens = 0
        for i in sorted(range(len(requests)), key=lambda i: need[i] - requests[i].max_new_tokens, reverse=True):
            if not waves or tokens + need[i] > budget:
                waves.append([])
                tokens = 0
            waves[-1].append(i)
            tokens += need[i]
        return [sorted(wave) for wave in waves]


    def generate_with_model_cache(self, requests: Sequence[GenRequest], on_result: Callable[[int, str], None] | None = None) -> list[str]:
        """Greedy generations with transformers' own cache, for models whose cache layers cannot be
        refilled: one request at a time here, each reported to ``on_result`` as it finishes;
        ``--backend fast`` (backends/fast.py) batches them through the hf backend's generate
        on the same model."""
        from .reference import plain_generate_until

        out = []
        for i, request in enumerate(requests):
            out += plain_generate_until(self.model, self.tokenizer, [request], self.max_length)
            if on_result is not None:
                on_result(i, out[-1])
        return out


def _progress(items: list, enabled: bool, desc: str):
    if not enabled:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit="pass")

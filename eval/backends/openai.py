"""Backends on an OpenAI-compatible HTTP server (vLLM, SGLang, TGI, llama.cpp, hosted APIs; docs/engines.md):
``openai-completions``: log-likelihoods from the echoed prompt's token log-probs, prompts as token ids tokenised
locally with the HF path's rules. ``openai-chat``: generation only, under the server's chat template."""

from __future__ import annotations

import json
import math
import os
from functools import partial
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

from ..api import (LOGPROB_ROUNDING, Backend, BackendOptions, BackendUnsupported, Capabilities, Constraint, GenRequest,
                   LLRequest, LLResult, backend_option, cut_at_stop)
from . import register_backend
from .http_client import (BACKOFF_BASE_S, MAX_BODY_BYTES, MalformedAnswer, OpenAIClient, ServerError, excerpt,
                          json_type)
from .hf_batches import chunks
from .engine_common import generation_prompt, ll_windows, load_tokenizer, model_max_length, stop_strings
from ..backend_support.identity import model_identity
from ..backend_support.options import engine_of
from ..backend_support.tokenization import render_chat

T = TypeVar("T")


@dataclass(frozen=True)
class ServerOptions:
    """The server and how it is asked; only the URL and how answers are decoded can change a number."""

    base_url: str | None = backend_option(None, "the server's URL, e.g. http://127.0.0.1:8000/v1")
    api_key_env: str | None = backend_option(
        None, "NAME of the environment variable holding the API key (never the key)", changes_numbers=False)
    concurrency: int = backend_option(4, "requests in flight at once", changes_numbers=False)
    timeout_s: float = backend_option(120.0, "deadline of each request in seconds (to its last byte, not per read)",
                                      changes_numbers=False)
    max_retries: int = backend_option(5, "retries of a failed request", changes_numbers=False)
    server_token_ids: bool = backend_option(True, "ask for the generated token ids (vLLM's return_token_ids) and "
                                            "decode them locally; false for servers that refuse unknown fields")


class _OpenAIBase(Backend):
    Options = ServerOptions

    @classmethod
    def reservation(cls, options: BackendOptions) -> dict[str, float]:
        return {"num_cpus": 1.0, "num_gpus": 0.0}  # a client: the server holds the GPUs

    @classmethod
    def from_options(cls, options: BackendOptions) -> "_OpenAIBase":
        return cls(options)

    def __init__(self, options: BackendOptions) -> None:
        server: ServerOptions = engine_of(type(self), options)
        if not server.base_url:
            raise ValueError(f"--backend {self.name} needs --backend-arg base_url=URL (e.g. http://127.0.0.1:8000/v1)")
        if options.batch_size is None:
            raise ValueError("--batch-size auto sizes batches by the model's memory; a server backend takes a number "
                             "(requests per HTTP request)")
        self.name_or_path, self.batch_size = options.model, options.batch_size
        key = os.environ.get(server.api_key_env) if server.api_key_env else None
        if server.api_key_env and not key:
            raise ValueError(f"--backend-arg api_key_env names the environment variable {server.api_key_env}, which is "
                             "not set or empty")
        # The answer bound and the backoff are read here, at construction (module settings tests lower).
        self.client = OpenAIClient(server.base_url, key, server.timeout_s, server.max_retries, server.concurrency,
                                   MAX_BODY_BYTES, BACKOFF_BASE_S)
        self.dtype, self.base_url = "server", server.base_url.rstrip("/")  # dtype: the server's choice
        # Token ids decoded here as the HF path does (the server's text holds back a trailing incomplete UTF-8 char).
        self.server_token_ids = server.server_token_ids
        self.tokenizer: Any = None

    def _generated_text(self, choice: dict, text: str, where: str) -> str:
        ids = choice.get("token_ids")
        if ids is None or self.tokenizer is None:
            return text
        vocab = len(self.tokenizer)
        if not isinstance(ids, list) or not all(type(t) is int and 0 <= t < vocab for t in ids):
            raise MalformedAnswer(f"{where}: 'token_ids' is {excerpt(json.dumps(ids))}, not a list of token ids below "
                                  f"{vocab}")
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def _extra_body(self, constraint: Constraint | None = None) -> dict:
        body: dict[str, Any] = {"return_token_ids": True} if self.server_token_ids else {}
        if constraint is not None:
            # vLLM's server field (0.32: CompletionRequest/ChatCompletionRequest.structured_outputs).
            body["structured_outputs"] = constraint.as_structured_outputs()
        return body

    def _post(self, path: str, body: dict, parse: Callable[[dict], T], request: str) -> T:
        try:
            return self.client.post(path, body, parse, request)
        except ServerError as err:
            if "structured_outputs" not in body or "refused the request" not in str(err):
                raise
            raise ServerError(f"{err} -- --constrained sends vLLM's `structured_outputs` request field; this server "
                              "refused the request (a server without vLLM's structured outputs cannot run "
                              "--constrained)") from err

    def cache_identity(self) -> dict[str, Any]:
        """The server, its model, the local tokenizer, the max length, every --backend-arg that changes a number;
        never the API key nor its variable's name (another key to the same server gives the same numbers)."""
        identity = model_identity(super().cache_identity(), self.name_or_path, self.tokenizer)
        identity.update(base_url=self.base_url, served_model=self.name_or_path,
                        max_length=getattr(self, "max_length", None))
        identity.get("options", {}).pop("base_url", None)  # normalised above: a trailing "/" is the same server
        return identity


@register_backend("openai-completions")
class OpenAICompletionsBackend(_OpenAIBase):
    """Log-likelihoods and generation through ``/v1/completions`` with token-id prompts."""

    # constrained: vLLM's `structured_outputs` request field (other servers refuse it, a clear error).
    capabilities = Capabilities(loglikelihood=True, generate=True, chat_template=True, constrained=True)
    requests_per_call = 512  # several HTTP requests in flight per resume-cache write

    def __init__(self, options: BackendOptions) -> None:
        super().__init__(options)
        # Our tokenisation, not the server's: the same token ids as the HF path.
        self.tokenizer = load_tokenizer(options.model, options.revision, options.trust_remote_code)
        self.max_length = options.max_length or model_max_length(options.model, self.tokenizer, options.revision,
                                                                 options.trust_remote_code)

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return render_chat(self.tokenizer, self.name_or_path, messages)

    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        batches = chunks(ll_windows(self.tokenizer, requests, self.max_length), self.batch_size)

        def score(job: tuple[int, Sequence[Any]]) -> list[LLResult]:
            number, batch = job
            body = {"model": self.name_or_path, "prompt": [list(w.ids) for w in batch], "echo": True, "logprobs": 1,
                    "max_tokens": 0, "temperature": 0}

            def parse(payload: dict) -> list[LLResult]:
                return [_echo_result(c, w.n_cont, len(w.ids), f"prompt {i} of the batch")
                        for i, (c, w) in enumerate(zip(_choices(payload, len(batch)), batch))]

            return self.client.post("completions", body, parse,
                                    f"log-likelihood batch {number}/{len(batches)}, {len(batch)} prompts")

        return [r for part in self.client.map(score, list(enumerate(batches, 1))) for r in part]

    def generate_until(self, requests: Sequence[GenRequest]) -> list[str]:
        # One HTTP request per batch of equal stop rules, length limits and constraints.
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault((r.stop, r.max_new_tokens, r.constraint), []).append(i)
        order = [part for idx in groups.values() for part in chunks(idx, self.batch_size)]

        def gen(job: tuple[int, Sequence[int]]) -> list[str]:
            number, part = job
            batch = [requests[i] for i in part]
            until = stop_strings(self.tokenizer, batch[0].stop)
            body = {"model": self.name_or_path,
                    "prompt": [generation_prompt(self.tokenizer, r, self.max_length) for r in batch],
                    "max_tokens": batch[0].max_new_tokens, "temperature": 0,
                    "stop": [s for s in until if s][:4] or None, **self._extra_body(batch[0].constraint)}

            def parse(payload: dict) -> list[str]:
                wheres = [f"prompt {i} of the batch" for i in range(len(batch))]
                return [cut_at_stop(self._generated_text(c, _field(c, "text", str, where), where), until)
                        for c, where in zip(_choices(payload, len(batch)), wheres)]

            return self._post("completions", body, parse,
                              f"generation batch {number}/{len(order)}, {len(batch)} prompts")

        out: list[str] = [""] * len(requests)
        for part, texts in zip(order, self.client.map(gen, list(enumerate(order, 1)))):
            for i, text in zip(part, texts, strict=True):
                out[i] = text
        return out


def _field(obj: dict, key: str, kind: type, where: str) -> Any:
    """``obj[key]``, which must be a ``kind`` (dict, list or str); a MalformedAnswer otherwise."""
    value = obj.get(key)
    if value is None:
        raise MalformedAnswer(f"{where}: no {key!r}" if key not in obj else f"{where}: {key!r} is null")
    if not isinstance(value, kind):
        raise MalformedAnswer(f"{where}: {key!r} is {json_type(value)}, not {json_type(kind())}: "
                              f"{excerpt(json.dumps(value))}")
    return value


def _choices(payload: dict, n: int) -> list[dict]:
    """The answer's ``choices``, exactly one per prompt sent, in prompt order (by their ``index``)."""
    choices = _field(payload, "choices", list, "the answer")
    if len(choices) != n:
        raise MalformedAnswer(f"{len(choices)} choices for the {n} prompts sent")
    by_index: dict[int, dict] = {}
    for pos, choice in enumerate(choices):
        if not isinstance(choice, dict):
            raise MalformedAnswer(f"choice {pos} is {json_type(choice)}, not an object")
        index = choice.get("index")
        if type(index) is not int or not 0 <= index < n or index in by_index:
            what = "a repeated index" if index in by_index else "an index not in 0.." + str(n - 1)
            raise MalformedAnswer(f"choice {pos} has {what}: {index!r}")
        by_index[index] = choice
    return [by_index[i] for i in range(n)]


def _logprob(value: Any, where: str) -> float:
    """A log-prob as a server may send it: a finite number <= 0 (within rounding)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value > LOGPROB_ROUNDING:
        raise MalformedAnswer(f"{where} is {excerpt(json.dumps(value))}, not a finite log-prob <= 0")
    return float(value)


def _echo_result(choice: dict, n_cont: int, n_prompt: int, where: str) -> LLResult:
    """The continuation's log-prob and greediness from an echoed prompt's token log-probs.

    The echo must have exactly the prompt's length (a server that adds its own BOS shifts every position: an error,
    never cut to length). Greedy: each continuation token's log-prob is the best at its position (values compared, not
    token strings, which several ids may share). The first position's null (no context) is never read."""
    logprobs = _field(choice, "logprobs", dict, where)
    token_lp = _field(logprobs, "token_logprobs", list, where)
    top = _field(logprobs, "top_logprobs", list, where)
    for name, values in (("token_logprobs", token_lp), ("top_logprobs", top)):
        if len(values) != n_prompt:
            raise MalformedAnswer(f"{where}: an echo of {len(values)} {name} for the {n_prompt} prompt tokens sent")
    total, greedy = 0.0, True
    for pos in range(n_prompt - n_cont, n_prompt):
        lp = _logprob(token_lp[pos], f"{where}: token_logprobs[{pos}]")
        alternatives = top[pos]
        if not isinstance(alternatives, dict) or not alternatives:
            raise MalformedAnswer(f"{where}: top_logprobs[{pos}] is {excerpt(json.dumps(alternatives))}, not a "
                                  "non-empty object")
        best = max(_logprob(v, f"{where}: top_logprobs[{pos}][{k!r}]") for k, v in alternatives.items())
        total += lp
        greedy = greedy and lp >= best
    return LLResult(total, greedy, n_cont)


@register_backend("openai-chat")
class OpenAIChatBackend(_OpenAIBase):
    """Generation through ``/v1/chat/completions``; no log-likelihoods (the chat API returns no prompt log-probs)."""

    capabilities = Capabilities(loglikelihood=False, generate=True, chat_template=False, chat_messages=True,
                                constrained=True)

    def __init__(self, options: BackendOptions) -> None:
        super().__init__(options)
        try:  # only to decode the server's token ids; a hosted model may have no local tokenizer
            self.tokenizer = load_tokenizer(options.model, options.revision, options.trust_remote_code)
        except (OSError, ValueError):
            self.tokenizer = None

    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        raise BackendUnsupported("--backend openai-chat cannot score multiple-choice tasks: the chat API returns no "
                                 "log-probabilities of given answers. Use --backend openai-completions, or a "
                                 "generative setting for multiple choice when one is available.")

    def generate_until(self, requests: Sequence[GenRequest]) -> list[str]:
        def gen(job: tuple[int, GenRequest]) -> str:
            number, req = job
            user = [{"role": "user", "content": req.context}]
            messages = [dict(m) for m in req.messages] if req.messages is not None else user
            stop = [s for s in req.stop if s][:4]
            body = {"model": self.name_or_path, "messages": messages, "max_tokens": req.max_new_tokens,
                    "temperature": 0, "stop": stop or None, **self._extra_body(req.constraint)}
            # vLLM's switch of the template (off is sent where vLLM's fields are)
            if req.thinking is not None or self.server_token_ids:
                body["chat_template_kwargs"] = {"enable_thinking": req.thinking is not None}
            parse = partial(self._chat_text, markers=req.thinking)
            return cut_at_stop(self._post("chat/completions", body, parse, f"chat request {number}/{len(requests)}"),
                               req.stop)

        return self.client.map(gen, list(enumerate(requests, 1)))

    def _chat_text(self, payload: dict, markers: tuple[str, str] | None = None) -> str:
        """The one choice's message text; a null ``content`` (the API's "no text", e.g. a refusal) is the empty
        generation. Thinking (``markers``): the server's separate trace (``reasoning_content`` or ``reasoning``, vLLM's
        --reasoning-parser) joined before the text within the markers, to be split off as an inline trace is."""
        choice = _choices(payload, 1)[0]
        message = _field(choice, "message", dict, "the choice")
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise MalformedAnswer(f"the choice: 'message.content' is {json_type(content)}, not a string")
        reasoning = message.get("reasoning_content", message.get("reasoning"))
        if reasoning is not None and not isinstance(reasoning, str):
            raise MalformedAnswer(f"the choice: 'message.reasoning_content' is {json_type(reasoning)}, not a string")
        if markers is None or not reasoning:
            return self._generated_text(choice, content or "", "the choice")
        # The server's text (its token ids would hold the trace too); no text and the budget spent: an unended trace.
        unfinished = not content and choice.get("finish_reason") == "length"
        return markers[0] + reasoning + ("" if unfinished else markers[1] + (content or ""))

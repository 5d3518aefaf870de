"""Backends on an OpenAI-compatible HTTP server (vLLM, SGLang, TGI, llama.cpp, hosted APIs).

``openai-completions`` (``/v1/completions``): log-likelihoods from the prompt's own
token log-probs (``echo: true, logprobs: 1, max_tokens: 0``) and greedy generation.
Prompts are sent as token ids, tokenised locally with the HF path's rules
(``engine_common``), so the server scores exactly the tokens the HF backend would;
several prompts go in one HTTP request (the endpoint takes a list).
``openai-chat`` (``/v1/chat/completions``): generation only; the server applies its
own chat template to the messages.

The API key is read from the environment variable named by ``api_key_env`` and only
ever put in the ``Authorization`` header: never logged, never in an error message,
results.json or the cache. Requests run ``concurrency`` at a time; 429, 5xx and
connection errors or timeouts are retried with exponential backoff. Only the
standard library is used (urllib), so these backends add no dependency.
"""

from __future__ import annotations

import http.client
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..api import Backend, BackendOptions, BackendUnsupported, Capabilities, Constraint, GenRequest, LLRequest, LLResult, backend_option, cut_at_stop
from . import register_backend
from .engine_common import generation_prompt, ll_windows, load_tokenizer, model_max_length, stop_strings
from .hf import render_chat

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 30.0


class ServerError(RuntimeError):
    """The server refused a request for good (a 4xx other than 408/409/429), or kept failing."""


class OpenAIClient:
    """A small JSON-over-HTTP client with retries, on the standard library (no extra dependency)."""

    def __init__(self, base_url: str, api_key: str | None, timeout_s: float, max_retries: int, concurrency: int) -> None:
        self.base_url = base_url.rstrip("/") + "/"
        self._secret = api_key
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.concurrency = concurrency
        self.sleep: Callable[[float], None] = time.sleep

    def __repr__(self) -> str:  # never the key
        return f"OpenAIClient({self.base_url!r})"

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def _send(self, url: str, body: dict) -> tuple[int, dict | str, str | None]:
        """(status, parsed JSON or error text, Retry-After) of one POST."""
        import urllib.error
        import urllib.request

        headers = {"Content-Type": "application/json"}
        if self._secret:
            headers["Authorization"] = f"Bearer {self._secret}"
        req = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return resp.status, json.loads(resp.read()), None
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode("utf-8", "replace")[:500], err.headers.get("Retry-After")

    def post(self, path: str, body: dict) -> dict:
        url = self.base_url + path.lstrip("/")
        last = ""
        for attempt in range(self.max_retries + 1):
            retry_after = None
            try:
                status, payload, retry_after = self._send(url, body)
            except (OSError, http.client.HTTPException) as err:  # refused/reset connections, timeouts
                last = f"{type(getattr(err, 'reason', err)).__name__}: {getattr(err, 'reason', err)}"
            else:
                if status < 300 and isinstance(payload, dict):
                    return payload
                last = f"HTTP {status}: {payload}"
                if status not in RETRY_STATUS:
                    raise ServerError(self._scrub(f"{url} refused the request: {last}"))
            if attempt < self.max_retries:
                delay = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempt)
                if retry_after and retry_after.replace(".", "", 1).isdigit():
                    delay = max(delay, min(BACKOFF_MAX_S, float(retry_after)))
                self.sleep(delay)
        raise ServerError(self._scrub(f"{url} failed {self.max_retries + 1} times; last error: {last}"))

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """``fn`` over ``items``, at most ``concurrency`` at a time, results in order."""
        if self.concurrency <= 1 or len(items) <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(fn, items))

    def close(self) -> None:
        """Nothing held between requests (one connection per request)."""


def _api_key(options: BackendOptions) -> str | None:
    if not options.api_key_env:
        return None
    key = os.environ.get(options.api_key_env)
    if not key:
        raise ValueError(f"--api-key-env names the environment variable {options.api_key_env}, which is not set or empty")
    return key


def _chunks(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


@dataclass(frozen=True)
class ServerOptions:
    """The server and how it is asked; only the URL and how answers are decoded can change a number."""

    base_url: str | None = backend_option(None, "the server's URL, e.g. http://127.0.0.1:8000/v1", flag="--base-url")
    api_key_env: str | None = backend_option(None, "NAME of the environment variable holding the API key (never the key)",
                                             changes_numbers=False, flag="--api-key-env")
    concurrency: int = backend_option(4, "requests in flight at once", changes_numbers=False, flag="--concurrency")
    timeout_s: float = backend_option(120.0, "seconds per request", changes_numbers=False, flag="--timeout")
    max_retries: int = backend_option(5, "retries of a failed request", changes_numbers=False, flag="--max-retries")
    server_token_ids: bool = backend_option(True, "ask for the generated token ids (vLLM's return_token_ids) and decode them "
                                                  "locally; false for servers that refuse unknown fields")


class _OpenAIBase(Backend):
    Options = ServerOptions

    def __init__(self, options: BackendOptions) -> None:
        if not options.base_url:
            raise ValueError(f"--backend {self.name} needs --base-url (e.g. http://127.0.0.1:8000/v1)")
        self.model_name = options.model
        if options.batch_size is None:
            raise ValueError("--batch-size auto sizes batches by the model's memory; a server backend takes a number (requests per HTTP request)")
        self.batch_size = options.batch_size
        self.client = OpenAIClient(options.base_url, _api_key(options), options.timeout_s, options.max_retries, options.concurrency)
        self.dtype = "server"  # the server's choice
        self.base_url = options.base_url.rstrip("/")
        # vLLM's `return_token_ids`: the generated ids, decoded here as the HF path decodes
        # them (the server's own text holds back a trailing incomplete UTF-8 character).
        # extra={"server_token_ids": False} for servers that reject unknown parameters.
        self.server_token_ids = bool(options.extra.get("server_token_ids", True))
        self.tokenizer: Any = None

    def _generated_text(self, choice: dict, text: str) -> str:
        ids = choice.get("token_ids")
        if ids is not None and self.tokenizer is not None:
            return self.tokenizer.decode(ids, skip_special_tokens=True)
        return text

    def _extra_body(self, constraint: Constraint | None = None) -> dict:
        body: dict[str, Any] = {"return_token_ids": True} if self.server_token_ids else {}
        if constraint is not None:
            # vLLM's server field (0.32: CompletionRequest/ChatCompletionRequest.structured_outputs).
            body["structured_outputs"] = constraint.as_structured_outputs()
        return body

    def _post(self, path: str, body: dict) -> dict:
        try:
            return self.client.post(path, body)
        except ServerError as err:
            if "structured_outputs" not in body:
                raise
            raise ServerError(
                f"{err} -- --constrained sends vLLM's `structured_outputs` request field; this server refused the "
                "request (a server without vLLM's structured outputs cannot run --constrained)"
            ) from err

    def cache_identity(self) -> dict[str, Any]:
        """The server (URL) and the model it serves (the name sent with every request), the local
        tokenizer that makes the token ids and decodes the answers (its files' fingerprint when
        local, its chat template), the max length, every --backend-arg (``server_token_ids``
        changes how answers are decoded). Never the API key, nor the name of its variable: another
        key to the same server gives the same numbers; concurrency, timeout and retries neither."""
        from ..identity import model_source_identity, tokenizer_identity

        identity = super().cache_identity()
        identity.pop("device", None)  # the server's device, not ours
        identity.update(model_source_identity(self.model_name, identity.get("revision")))
        identity.update(tokenizer_identity(self.tokenizer, self.model_name))
        identity.update(base_url=self.base_url, served_model=self.model_name, max_length=getattr(self, "max_length", None))
        identity.get("options", {}).pop("base_url", None)  # normalised above: a trailing "/" is the same server
        return identity

    def close(self) -> None:
        self.client.close()


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
        self.max_length = options.max_length or model_max_length(options.model, self.tokenizer, options.revision, options.trust_remote_code)

    @classmethod
    def from_options(cls, options: BackendOptions) -> "OpenAICompletionsBackend":
        return cls(options)

    def apply_chat_template(self, messages: list[dict[str, str]]) -> str:
        return render_chat(self.tokenizer, self.model_name, messages)

    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        windows = ll_windows(self.tokenizer, requests, self.max_length)

        def score(batch: Sequence[Any]) -> list[LLResult]:
            body = {"model": self.model_name, "prompt": [list(w.ids) for w in batch], "echo": True, "logprobs": 1,
                    "max_tokens": 0, "temperature": 0}
            choices = sorted(self.client.post("completions", body)["choices"], key=lambda c: c["index"])
            return [_echo_result(c["logprobs"], w.n_cont, len(w.ids)) for c, w in zip(choices, batch)]

        return [r for part in self.client.map(score, _chunks(windows, self.batch_size)) for r in part]

    def generate_until(self, requests: Sequence[GenRequest]) -> list[str]:
        def gen(batch: Sequence[GenRequest]) -> list[str]:
            until = stop_strings(self.tokenizer, batch[0].stop)
            body = {"model": self.model_name, "prompt": [generation_prompt(self.tokenizer, r, self.max_length) for r in batch],
                    "max_tokens": batch[0].max_new_tokens, "temperature": 0, "stop": [s for s in until if s][:4] or None,
                    **self._extra_body(batch[0].constraint)}
            choices = sorted(self._post("completions", body)["choices"], key=lambda c: c["index"])
            return [cut_at_stop(self._generated_text(c, c["text"]), until) for c in choices]

        # One HTTP request per batch of equal stop rules, length limits and constraints.
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault((r.stop, r.max_new_tokens, r.constraint), []).append(i)
        batches = [[requests[i] for i in part] for idx in groups.values() for part in _chunks(idx, self.batch_size)]
        order = [i for idx in groups.values() for part in _chunks(idx, self.batch_size) for i in part]
        out: list[str] = [""] * len(requests)
        for i, text in zip(order, [t for part in self.client.map(gen, batches) for t in part]):
            out[i] = text
        return out


def _echo_result(logprobs: dict, n_cont: int, n_prompt: int) -> LLResult:
    """The continuation's log-prob and greediness from an echoed prompt's token log-probs.

    Greedy: each continuation token's log-prob is the best at its position (a comparison
    of values, not of token strings, which several token ids may share)."""
    token_lp = logprobs["token_logprobs"][:n_prompt]
    top = logprobs["top_logprobs"][:n_prompt]
    if len(token_lp) != n_prompt:
        raise ServerError(f"the server echoed {len(token_lp)} prompt tokens, {n_prompt} were sent")
    total, greedy = 0.0, True
    for lp, alternatives in zip(token_lp[-n_cont:], top[-n_cont:]):
        total += lp
        greedy = greedy and lp >= max(alternatives.values())
    return LLResult(total, bool(greedy), n_cont)


@register_backend("openai-chat")
class OpenAIChatBackend(_OpenAIBase):
    """Generation through ``/v1/chat/completions``; no log-likelihoods (the chat API returns no prompt log-probs)."""

    capabilities = Capabilities(loglikelihood=False, generate=True, chat_template=False, chat_messages=True, constrained=True)

    def __init__(self, options: BackendOptions) -> None:
        super().__init__(options)
        try:  # only to decode the server's token ids; a hosted model may have no local tokenizer
            self.tokenizer = load_tokenizer(options.model, options.revision, options.trust_remote_code)
        except (OSError, ValueError):
            self.tokenizer = None

    @classmethod
    def from_options(cls, options: BackendOptions) -> "OpenAIChatBackend":
        return cls(options)

    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        raise BackendUnsupported(
            "--backend openai-chat cannot score multiple-choice tasks: the chat API returns no log-probabilities of given "
            "answers. Use --backend openai-completions, or a generative setting for multiple choice when one is available."
        )

    def generate_until(self, requests: Sequence[GenRequest]) -> list[str]:
        def gen(req: GenRequest) -> str:
            messages = [dict(m) for m in req.messages] if req.messages is not None else [{"role": "user", "content": req.context}]
            stop = [s for s in req.stop if s][:4]
            body = {"model": self.model_name, "messages": messages, "max_tokens": req.max_new_tokens, "temperature": 0,
                    "stop": stop or None, **self._extra_body(req.constraint)}
            choice = self._post("chat/completions", body)["choices"][0]
            return cut_at_stop(self._generated_text(choice, choice["message"]["content"] or ""), req.stop)

        return self.client.map(gen, list(requests))

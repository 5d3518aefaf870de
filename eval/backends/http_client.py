"""JSON over HTTP for the server backends (eval/backends/openai.py), on urllib: retries with backoff, one deadline per
request, a bounded answer body, no redirects (the key would follow them), the key in no message (docs/engines.md)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Callable, Sequence, TypeVar

T = TypeVar("T")
RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 30.0
# The largest answer body read: a batch of log-probs is a few MB; past this the server is faulty.
MAX_BODY_BYTES = 64 * 2**20
READ_CHUNK_BYTES = 64 * 2**10
ERROR_TEXT_CHARS = 500  # of a refusal's body, in the error message (after the key is scrubbed)


class ServerError(RuntimeError):
    """The server refused a request for good, answered in a way that cannot be used, or kept failing."""


class MalformedAnswer(ValueError):
    """An answer of the wrong shape, type, length or value (retried: a server may recover)."""


class _Deadline:
    """One request's deadline: at it the connection's socket is shut down, which ends a read in progress (a socket
    timeout bounds each read, not the request: a server may drip forever)."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.expired, self._end = seconds, False, time.monotonic() + seconds
        self._timer: threading.Timer | None = None

    def watch(self, sock: socket.socket) -> None:
        self._timer = threading.Timer(max(0.0, self._end - time.monotonic()), self._expire, (sock,))
        self._timer.daemon = True
        self._timer.start()

    def _expire(self, sock: socket.socket) -> None:
        self.expired = True
        try:  # the plain socket's shutdown: an SSL socket's own would drop its state under the reader
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class _WatchedConnection:
    """A connection whose socket its request's deadline watches (a mixin of http.client's connections)."""

    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        self.deadline = deadline

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        self.deadline.watch(self.sock)  # type: ignore[attr-defined]


class _WatchedHTTP(_WatchedConnection, http.client.HTTPConnection):
    pass


class _WatchedHTTPS(_WatchedConnection, http.client.HTTPSConnection):
    pass


class _DeadlineHandler(urllib.request.HTTPRedirectHandler, urllib.request.HTTPHandler, urllib.request.HTTPSHandler):
    """Both schemes' connections watched by ``deadline``, and no redirect followed: it would carry the ``Authorization``
    header to another address (build_opener then adds none of the three default handlers)."""

    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def redirect_request(self, *args: Any) -> None:
        return None  # urllib then raises the 3xx as an HTTPError

    def http_open(self, req: Any) -> Any:
        return self.do_open(partial(_WatchedHTTP, deadline=self.deadline), req)

    def https_open(self, req: Any) -> Any:
        return self.do_open(partial(_WatchedHTTPS, deadline=self.deadline), req, context=self._context)


def parse_json_answer(data: bytes) -> dict:
    """A 2xx answer body as a JSON object; a MalformedAnswer saying what it is otherwise."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise MalformedAnswer(f"not UTF-8 (byte 0x{data[err.start]:02x} at position {err.start})") from None
    try:
        payload = json.loads(text)  # NaN and Infinity parse: the checks of each value say where they were
    except json.JSONDecodeError as err:
        raise MalformedAnswer(f"not JSON ({err.msg} at line {err.lineno} column {err.colno}): "
                              f"{excerpt(text)}") from None
    except RecursionError:
        raise MalformedAnswer("JSON nested too deeply to be an answer") from None
    if not isinstance(payload, dict):
        raise MalformedAnswer(f"{json_type(payload)}, not an object: {excerpt(text)}")
    return payload


def excerpt(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= n else text[:n] + "...")


def json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number"}
    return names.get(type(value), type(value).__name__)


class OpenAIClient:
    """Every answer is untrusted: ``post`` hands the parsed body to the caller's ``parse``, which raises
    MalformedAnswer on anything it cannot use; that, 408/409/429/5xx, connection errors and the deadline are retried,
    other faults stop at once. Messages name the server and the request, never the key."""

    def __init__(self, base_url: str, api_key: str | None, timeout_s: float, max_retries: int, concurrency: int,
                 max_body_bytes: int = MAX_BODY_BYTES, backoff_base_s: float = BACKOFF_BASE_S) -> None:
        self.max_body_bytes, self.backoff_base_s = max_body_bytes, backoff_base_s
        self.base_url, self._secret = base_url.rstrip("/") + "/", api_key
        self.timeout_s, self.max_retries, self.concurrency = timeout_s, max_retries, concurrency
        self.sleep: Callable[[float], None] = time.sleep

    def __repr__(self) -> str:  # never the key
        return f"OpenAIClient({self.base_url!r})"

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def _error_text(self, data: bytes) -> str:
        """A refusal's body for a message: one line, the key scrubbed from the whole text before it is cut."""
        text = " ".join(self._scrub(data.decode("utf-8", "replace")).split())
        return text if len(text) <= ERROR_TEXT_CHARS else text[:ERROR_TEXT_CHARS] + "..."

    def _read_body(self, resp: Any, url: str, request: str) -> bytes:
        """The body, in chunks, at most ``max_body_bytes`` bytes: past it a ServerError (not retried)."""
        declared, limit, chunks, size = resp.headers.get("Content-Length", ""), self.max_body_bytes, [], 0
        too_large = f"declared {int(declared)} bytes" if declared.isdigit() and int(declared) > limit else None
        while too_large is None and (chunk := resp.read(READ_CHUNK_BYTES)):
            size += len(chunk)
            too_large = f"more than {size - len(chunk)} bytes" if size > limit else None
            chunks.append(chunk)
        if too_large is not None:
            raise ServerError(f"server {url} sent an answer larger than the {limit}-byte bound ({too_large}) "
                              f"[{request}]") from None
        return b"".join(chunks)

    def _send(self, url: str, body: dict, request: str) -> tuple[int, bytes, str | None]:
        """(status, body, Retry-After) of one POST, within ``timeout_s`` from start to the body's last byte."""
        headers = {"Content-Type": "application/json"}
        if self._secret:
            headers["Authorization"] = f"Bearer {self._secret}"
        req = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
        deadline = _Deadline(self.timeout_s)
        opener = urllib.request.build_opener(_DeadlineHandler(deadline))
        try:
            try:
                with opener.open(req, timeout=self.timeout_s) as resp:
                    answer = resp.status, self._read_body(resp, url, request), None
            except urllib.error.HTTPError as err:
                with err:
                    if 300 <= err.code < 400:
                        location = self._scrub(str(err.headers.get("Location")))[:200]
                        raise ServerError(f"server {url} redirected the request to {location!r} (HTTP {err.code}); "
                                          "redirects are not followed, so that the API key goes to no other address: "
                                          f"give the final address as --backend-arg base_url [{request}]") from None
                    answer = err.code, self._read_body(err, url, request), err.headers.get("Retry-After")
        except (OSError, http.client.HTTPException):
            if deadline.expired:
                raise TimeoutError(f"no complete answer within --timeout {self.timeout_s:g} s") from None
            raise
        finally:
            deadline.cancel()
        if deadline.expired:  # a body without Content-Length ends at the shutdown: cut, not whole
            raise TimeoutError(f"no complete answer within --timeout {self.timeout_s:g} s")
        return answer

    def post(self, path: str, body: dict, parse: Callable[[dict], T], request: str) -> T:
        """``parse`` of the server's JSON answer to ``body``; ``request`` says which request it is, in messages."""
        url = self.base_url + path.lstrip("/")
        last = ""
        for attempt in range(self.max_retries + 1):
            retry_after = None
            try:
                status, data, retry_after = self._send(url, body, request)
                if 200 <= status < 300:
                    return parse(parse_json_answer(data))
                last = f"HTTP {status}: {self._error_text(data)}"
                if status not in RETRY_STATUS:
                    raise ServerError(f"server {url} refused the request: {last} [{request}]")
            except MalformedAnswer as err:
                last = f"malformed answer: {self._scrub(str(err))}"
            except (OSError, http.client.HTTPException) as err:  # refused/reset connections, the deadline
                reason = getattr(err, "reason", err)
                last = self._scrub(f"{type(reason).__name__}: {reason}")
            if attempt < self.max_retries:
                delay = min(BACKOFF_MAX_S, self.backoff_base_s * 2**attempt)
                if retry_after and retry_after.replace(".", "", 1).isdigit():
                    delay = max(delay, min(BACKOFF_MAX_S, float(retry_after)))
                self.sleep(delay)
        tries = self.max_retries + 1
        raise ServerError(f"server {url} failed {tries} time{'s' if tries > 1 else ''}; last error: {last} [{request}]")

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """``fn`` over ``items``, at most ``concurrency`` at a time, results in order."""
        if self.concurrency <= 1 or len(items) <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(fn, items))

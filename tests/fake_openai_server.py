"""A fake OpenAI-compatible server on 127.0.0.1 that answers with canned values or lies (issue 22).

Used by tests/eval/backends/test_untrusted_server.py and scripts/probe_integrity.py --server. Only the
standard library: ThreadingHTTPServer in a thread, bound to port 0, stopped by ``stop()``.
The canned answers compute nothing real: deterministic log-probs from the token ids, and a
generation made of the prompt's ids, so that a clean run is the reference of a lying one.
"""

from __future__ import annotations

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable


def _logprob(prev: int, tok: int) -> float:
    """A canned, deterministic log-prob of ``tok`` after ``prev`` (the fake computes nothing real)."""
    return -(((tok * 31 + prev * 17) % 23) + 1) / 7


def _best(prev: int) -> float:
    return -((prev * 13) % 5 + 1) / 7


def honest_answer(path: str, body: dict, chat_script: "Callable[[dict], dict] | None" = None) -> dict:
    if path.endswith("/chat/completions") and chat_script is not None:
        return {"choices": [{"index": 0, **chat_script(body)}]}  # a scripted choice: message, finish_reason
    if path.endswith("/chat/completions"):
        turns = body["messages"]
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": f"risposta {len(turns)}: {len(turns[-1]['content']) % 7}"}}]}
    choices = []
    for i, ids in enumerate(body["prompt"]):
        if body.get("echo"):
            lps = [_logprob(a, b) for a, b in zip(ids, ids[1:])]
            top = [{"x": max(lp, _best(a))} for lp, a in zip(lps, ids)]
            choices.append({"index": i, "text": "", "logprobs": {"token_logprobs": [None, *lps], "top_logprobs": [None, *top]}})
        else:
            choices.append({"index": i, "text": f"Sì {sum(ids) % 97}, poi\n altro"})
    return {"choices": choices}


def _first_echo(answer: dict) -> dict:
    return answer["choices"][0]["logprobs"]


# Lies that change the honest answer's JSON.
JSON_LIES: dict[str, Callable[[dict], Any]] = {
    "fewer": lambda a: {"choices": a["choices"][:-1]},
    "more": lambda a: {"choices": [*a["choices"], dict(a["choices"][0], index=len(a["choices"]))]},
    "dup_index": lambda a: {"choices": [dict(c, index=0) for c in a["choices"]]},
    "index_string": lambda a: {"choices": [dict(c, index=str(c["index"])) for c in a["choices"]]},
    "bos": lambda a: (_first_echo(a).update(token_logprobs=[None, -0.1, *_first_echo(a)["token_logprobs"][1:]],
                                            top_logprobs=[None, {"x": -0.1}, *_first_echo(a)["top_logprobs"][1:]]), a)[1],
    "nan": lambda a: (_first_echo(a)["token_logprobs"].__setitem__(-1, math.nan), a)[1],
    "inf_top": lambda a: (_first_echo(a)["top_logprobs"][-1].__setitem__("x", -math.inf), a)[1],
    "positive": lambda a: (_first_echo(a)["token_logprobs"].__setitem__(-1, 0.5), a)[1],
    "string_lp": lambda a: (_first_echo(a)["token_logprobs"].__setitem__(-1, "-0.5"), a)[1],
    "null_lp": lambda a: (_first_echo(a)["token_logprobs"].__setitem__(-1, None), a)[1],
    "short_top": lambda a: (_first_echo(a)["top_logprobs"].pop(), a)[1],
    "no_choices": lambda a: {"object": "text_completion"},
    "choices_object": lambda a: {"choices": {"0": a["choices"][0]}},
    "no_logprobs": lambda a: {"choices": [dict(c, logprobs=None) for c in a["choices"]]},
    "null_text": lambda a: {"choices": [dict(c, text=None) for c in a["choices"]]},
    "bad_token_ids": lambda a: {"choices": [dict(c, token_ids=[10**9]) for c in a["choices"]]},
    "list_answer": lambda a: a["choices"],
    "chat_content_number": lambda a: {"choices": [{"index": 0, "message": {"content": 42}}]},
    "chat_no_message": lambda a: {"choices": [{"index": 0}]},
    "chat_two": lambda a: {"choices": [a["choices"][0], dict(a["choices"][0], index=1)]},
}
ECHO_LIES = frozenset({"bos", "nan", "inf_top", "positive", "string_lp", "null_lp", "short_top", "no_logprobs"})
# Lies in the bytes of the answer.
RAW_LIES: dict[str, bytes] = {
    "not_json": b'{"choices": [{"index": 0 "text": "x"}]}',
    "not_utf8": b'{"choices": [{"index": 0, "text": "\xff\xfe"}]}',
    "nested": b"[" * 200_000,
    "nan_literal": b'{"choices": NaN}',
}


class FakeServer:
    """An OpenAI-compatible server with canned answers; requests ``first_lie`` .. ``first_lie + n_lies - 1``
    (counted from 0; ``n_lies`` None: every one after) get the lie ``fault``."""

    def __init__(self) -> None:
        self.fault: str | None = None
        self.first_lie = 0
        self.n_lies: int | None = None
        self.redirect_to = ""
        self.huge_bytes = 0
        # A scripted chat choice ({"message": ..., "finish_reason": ...}) per request body, e.g. a reasoning
        # model's trace in ``reasoning_content`` or inline ``<think>`` tags; None: the canned answer.
        self.chat_script: Callable[[dict], dict] | None = None
        self.seen: list[tuple[str, str | None, dict]] = []  # (path, Authorization, body)
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with fake._lock:
                    n = len(fake.seen)
                    fake.seen.append((self.path, self.headers.get("Authorization"), body))
                lying = fake.fault is not None and n >= fake.first_lie and (fake.n_lies is None or n < fake.first_lie + fake.n_lies)
                try:
                    fake.answer(self, body, fake.fault if lying else None)
                except OSError:  # the client gave up (its deadline): nothing more to say
                    pass

            def do_GET(self) -> None:  # noqa: N802  (where a followed 302 would land)
                with fake._lock:
                    fake.seen.append((self.path, self.headers.get("Authorization"), {}))
                _send(self, 404, b"{}")

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def lie(self, fault: str, first: int = 0, count: int | None = None) -> None:
        self.fault, self.first_lie, self.n_lies = fault, first, count

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, h: BaseHTTPRequestHandler, body: dict, fault: str | None) -> None:
        honest = honest_answer(h.path, body, self.chat_script)
        if fault in ECHO_LIES and not body.get("echo"):
            fault = None  # a lie about log-probs, to a request for generations: the truth
        if fault is None:
            return _send(h, 200, json.dumps(honest).encode())
        if fault in JSON_LIES:
            return _send(h, 200, json.dumps(JSON_LIES[fault](honest)).encode())
        if fault in RAW_LIES:
            return _send(h, 200, RAW_LIES[fault])
        if fault == "redirect":
            return _send(h, 302, b"", {"Location": self.redirect_to})
        if fault == "503":
            return _send(h, 503, b'{"error": "busy"}', {"Retry-After": "0"})
        if fault == "401_key":  # the key the client sent, across the 500th character
            key = (h.headers.get("Authorization") or "").removeprefix("Bearer ")
            return _send(h, 401, json.dumps({"error": "x" * 470 + f" invalid key {key}, try again"}).encode())
        if fault in ("huge", "huge_unsized"):
            data = json.dumps(honest).encode()  # an answer object padded at its end, without a slow dumps of the padding
            return _send(h, 200, data[:-1] + b', "padding": "' + b"p" * self.huge_bytes + b'"}', sized=fault == "huge")
        if fault in ("drip_body", "drip_headers"):
            return _drip(h, json.dumps(honest).encode(), headers_too=fault == "drip_headers")
        raise AssertionError(f"unknown fault {fault}")


def _send(h: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict | None = None, sized: bool = True) -> None:
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        h.send_header(k, v)
    if sized:
        h.send_header("Content-Length", str(len(data)))
    else:  # the body ends when the connection closes
        h.send_header("Connection", "close")
        h.close_connection = True
    h.end_headers()
    h.wfile.write(data)
    h.wfile.flush()


def _drip(h: BaseHTTPRequestHandler, data: bytes, headers_too: bool) -> None:
    """One byte a second: of the body, or of the whole answer, status line included."""
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
    if not headers_too:
        h.wfile.write(head)
        h.wfile.flush()
    for byte in (head + data if headers_too else data):
        h.wfile.write(bytes([byte]))
        h.wfile.flush()
        time.sleep(1)


# Every lie, and whether a retry can get past it (a server that lies once and then answers).
FAULTS_NOT_RETRIED = frozenset({"redirect", "401_key", "huge", "huge_unsized"})
CHAT_FAULTS = frozenset({"chat_content_number", "chat_no_message", "chat_two"})
ALL_FAULTS = (*JSON_LIES, *RAW_LIES, "redirect", "503", "401_key", "huge", "huge_unsized", "drip_body", "drip_headers")

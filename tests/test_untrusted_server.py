"""The OpenAI-compatible backends against a server that lies (issue 22, findings 1-8).

A fake server on 127.0.0.1 (the standard library's ThreadingHTTPServer, started and shut
down by the fixture) answers like an OpenAI-compatible server with canned values, or lies in
one way for some requests: a redirect carrying the key elsewhere, too few choices, an echo one
log-prob longer than the prompt, NaN, a drip of one byte a second, a 401 echoing the key, a
huge or deeply nested body, malformed JSON. Every lie must end as one error line naming the
server, the request and the fault (or, when it passes, be retried into the clean answer), and
nothing it said may reach the cache, the samples or results.json. No vLLM needed.
"""

from __future__ import annotations

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest
from click.testing import CliRunner

from evalita_eval.api import Backend, BackendOptions, Capabilities, GenRequest, LLRequest, LLResult, check_ll_result
from evalita_eval.backends import create_backend
from evalita_eval.backends import openai as oai

DATA = Path(__file__).parent / "data" / "build"
KEY_ENV = "EVALITA_TEST_UNTRUSTED_KEY"
API_KEY = "sk-evalita-untrusted-3f9a27c1d8e4b6a0"
LL_REQUESTS = [LLRequest("Qual è la capitale d'Italia?", c) for c in (" Roma", " Milano e Busseto", " Napoli")]


# ------------------------------------------------------------------ the fake server


def _logprob(prev: int, tok: int) -> float:
    """A canned, deterministic log-prob of ``tok`` after ``prev`` (the fake computes nothing real)."""
    return -(((tok * 31 + prev * 17) % 23) + 1) / 7


def _best(prev: int) -> float:
    return -((prev * 13) % 5 + 1) / 7


def honest_answer(path: str, body: dict) -> dict:
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
        honest = honest_answer(h.path, body)
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
            data = json.dumps(dict(honest, padding="p" * self.huge_bytes)).encode()
            return _send(h, 200, data, sized=fault == "huge")
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


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.stop()


@pytest.fixture
def key_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, API_KEY)


def make_backend(kind: str, model: Path, url: str, **options: Any) -> Any:
    options = {"max_retries": 0, "concurrency": 1, "batch_size": 3, **options}
    backend = create_backend(kind, BackendOptions(model=str(model), base_url=url, api_key_env=KEY_ENV, **options))
    backend.client.sleep = lambda s: None  # retries are counted, not slept
    return backend


def fails_with(call: Callable[[], Any], *parts: str) -> str:
    """The ServerError of ``call``: one line, the key nowhere, each of ``parts`` in it."""
    with pytest.raises(oai.ServerError) as err:
        call()
    text = str(err.value)
    assert "\n" not in text and API_KEY not in text
    for part in parts:
        assert part in text, (part, text)
    return text


# ------------------------------------------------------------------ 1. redirects


def test_a_redirect_is_not_followed_and_the_key_goes_nowhere_else(tiny_model: Path, server: FakeServer, key_in_env) -> None:
    elsewhere = FakeServer()
    try:
        server.lie("redirect")
        server.redirect_to = elsewhere.url + "/completions"
        backend = make_backend("openai-completions", tiny_model, server.url, max_retries=3)
        text = fails_with(lambda: backend.generate_until([GenRequest("ciao", (), 2)]),
                          f"server {server.url}/completions redirected the request to '{elsewhere.url}/completions' (HTTP 302)",
                          "give the final address as --base-url [generation batch 1/1, 1 prompts]")
        assert elsewhere.seen == []  # not followed at all: no key, no request
        assert len(server.seen) == 1, text  # and not retried
        chat = make_backend("openai-chat", tiny_model, server.url)
        fails_with(lambda: chat.generate_until([GenRequest("ciao", (), 2)]), "redirected the request", "[chat request 1/1]")
        assert elsewhere.seen == []
    finally:
        elsewhere.stop()


# ------------------------------------------------------------------ 2. choices: count, index, types


@pytest.mark.parametrize("fault, problem", [
    ("fewer", "2 choices for the 3 prompts sent"),
    ("more", "4 choices for the 3 prompts sent"),
    ("dup_index", "choice 1 has a repeated index: 0"),
    ("index_string", "choice 0 has an index not in 0..2: '0'"),
    ("choices_object", "'choices' is an object, not an array"),
])
def test_choices_that_do_not_match_the_prompts_are_an_error(tiny_model: Path, server: FakeServer, key_in_env, fault: str, problem: str) -> None:
    server.lie(fault)
    backend = make_backend("openai-completions", tiny_model, server.url)
    fails_with(lambda: backend.loglikelihood(LL_REQUESTS),
               f"server {server.url}/completions failed 1 time; last error: malformed answer: ", problem,
               "[log-likelihood batch 1/1, 3 prompts]")
    gens = [GenRequest(f"domanda {i}", (), 4) for i in range(3)]
    fails_with(lambda: backend.generate_until(gens), problem, "[generation batch 1/1, 3 prompts]")


def test_a_wrong_count_is_retried_into_the_clean_answer(tiny_model: Path, server: FakeServer, key_in_env) -> None:
    clean = make_backend("openai-completions", tiny_model, server.url)
    want_ll, want_gen = clean.loglikelihood(LL_REQUESTS), clean.generate_until([GenRequest(f"d {i}", (), 4) for i in range(3)])
    assert all(r.logprob < 0 for r in want_ll) and all(want_gen)
    backend = make_backend("openai-completions", tiny_model, server.url, max_retries=2)
    server.seen.clear()
    server.lie("fewer", first=0, count=2)
    assert backend.loglikelihood(LL_REQUESTS) == want_ll
    assert len(server.seen) == 3
    server.lie("fewer", first=3, count=1)
    assert backend.generate_until([GenRequest(f"d {i}", (), 4) for i in range(3)]) == want_gen
    assert len(server.seen) == 5


# ------------------------------------------------------------------ 3-4. echo length, log-prob values


@pytest.mark.parametrize("fault, problem", [
    ("bos", "prompt 0 of the batch: an echo of {n1} token_logprobs for the {n} prompt tokens sent"),
    ("short_top", "prompt 0 of the batch: an echo of {n_1} top_logprobs for the {n} prompt tokens sent"),
    ("nan", "prompt 0 of the batch: token_logprobs[{last}] is 'NaN', not a finite log-prob <= 0"),
    ("positive", "token_logprobs[{last}] is '0.5', not a finite log-prob <= 0"),
    ("string_lp", "token_logprobs[{last}] is '\"-0.5\"', not a finite log-prob <= 0"),
    ("null_lp", "token_logprobs[{last}] is 'null', not a finite log-prob <= 0"),
    ("inf_top", "top_logprobs[{last}]['x'] is '-Infinity', not a finite log-prob <= 0"),
    ("no_logprobs", "prompt 0 of the batch: 'logprobs' is null"),
])
def test_echo_length_and_log_prob_values_are_checked(tiny_model: Path, server: FakeServer, key_in_env, fault: str, problem: str) -> None:
    backend = make_backend("openai-completions", tiny_model, server.url)
    backend.loglikelihood(LL_REQUESTS)
    n = len(server.seen[0][2]["prompt"][0])
    server.lie(fault)
    fails_with(lambda: backend.loglikelihood(LL_REQUESTS), f"server {server.url}/completions failed 1 time; last error: malformed answer: ",
               problem.format(n=n, n1=n + 1, n_1=n - 1, last=n - 1), "[log-likelihood batch 1/1, 3 prompts]")


def test_check_ll_result_refuses_what_no_score_can_be_made_of() -> None:
    good = LLResult(-1.5, True, 2)
    assert check_ll_result(good, "b") is good and check_ll_result(LLResult(0, False, 1), "b").logprob == 0
    for bad, problem in [
        (LLResult(math.nan, True, 1), "the log-prob nan, not a finite number <= 0"),
        (LLResult(-math.inf, True, 1), "the log-prob -inf"),
        (LLResult(0.5, True, 1), "the log-prob 0.5"),
        (LLResult("-1", True, 1), "a log-prob of type str"),  # type: ignore[arg-type]
        (LLResult(-1.0, 1, 1), "is_greedy 1, not a bool"),  # type: ignore[arg-type]
        (LLResult(-1.0, True, 0), "n_tokens 0, not an int > 0"),
        ((-1.0, True), "a tuple, not an LLResult"),
    ]:
        with pytest.raises(ValueError, match="backend 'b' returned " + problem.replace("(", r"\(").replace(")", r"\)")):
            check_ll_result(bad, "b")


class _NaNBackend(Backend):
    """Scores every second request NaN (an engine that overflowed)."""

    name = "nan-stub"
    capabilities = Capabilities(generate=False, chat_template=False)

    @classmethod
    def from_options(cls, options: BackendOptions) -> "_NaNBackend":
        return cls()

    def loglikelihood(self, requests: Sequence[LLRequest]) -> list[LLResult]:
        return [LLResult(math.nan if i % 2 else -1.0, False, 1) for i in range(len(requests))]


def test_the_runner_caches_and_scores_no_non_finite_log_prob(tmp_path: Path) -> None:
    from evalita_eval.runner import ModelInfo, RunConfig, Runner
    from evalita_eval.tasks import DataSource, select_entries

    out = tmp_path / "res"
    runner = Runner(_NaNBackend(), ModelInfo("m", None, "none", "nan-stub"), DataSource(str(DATA)), RunConfig(progress=False, limit=2), out)
    with pytest.raises(ValueError, match="backend 'nan-stub' returned the log-prob nan, not a finite number <= 0"):
        runner.run(select_entries(["te"]))
    cached = [json.loads(x)["value"] for x in (out / "cache.jsonl").read_text("utf-8").splitlines()]
    assert cached == [[-1.0, False]]  # the one good value before the NaN; the NaN nowhere
    assert not (out / "samples").exists() and not (out / "results.json").exists()


# ------------------------------------------------------------------ 5. the deadline


@pytest.mark.parametrize("fault", ["drip_body", "drip_headers"])
def test_timeout_is_a_deadline_per_request_not_per_read(tiny_model: Path, server: FakeServer, key_in_env, fault: str) -> None:
    """One byte a second never trips a per-read timeout of 1.5 s; the request's deadline does."""
    server.lie(fault)
    backend = make_backend("openai-completions", tiny_model, server.url, timeout_s=1.5, batch_size=1)
    fails_with(lambda: backend.generate_until([GenRequest("ciao", (), 2)]),
               f"server {server.url}/completions failed 1 time; last error: TimeoutError: no complete answer within --timeout 1.5 s",
               "[generation batch 1/1, 1 prompts]")


# ------------------------------------------------------------------ 6. the key in a refusal


def test_a_refusal_echoing_the_key_shows_no_part_of_it(tiny_model: Path, server: FakeServer, key_in_env) -> None:
    server.lie("401_key")
    backend = make_backend("openai-completions", tiny_model, server.url)
    text = fails_with(lambda: backend.generate_until([GenRequest("ciao", (), 2)]),
                      f"server {server.url}/completions refused the request: HTTP 401: ", "[generation batch 1/1, 1 prompts]")
    assert all(API_KEY[i : i + 6] not in text for i in range(len(API_KEY) - 5)), text
    assert "invalid key ***" in text


# ------------------------------------------------------------------ 7. the body's size


@pytest.mark.parametrize("fault", ["huge", "huge_unsized"])
def test_a_body_over_the_bound_is_an_error_not_retried(tiny_model: Path, server: FakeServer, key_in_env, monkeypatch, fault: str) -> None:
    monkeypatch.setattr(oai, "MAX_BODY_BYTES", 64 * 1024, raising=False)
    server.lie(fault)
    server.huge_bytes = 1 << 20
    backend = make_backend("openai-completions", tiny_model, server.url, max_retries=3)
    fails_with(lambda: backend.loglikelihood(LL_REQUESTS), f"server {server.url}/completions sent an answer larger than the 65536-byte bound",
               "[log-likelihood batch 1/1, 3 prompts]")
    assert len(server.seen) == 1
    server.huge_bytes = 1000  # under the bound: a padded answer is still an answer
    assert all(r.logprob < 0 for r in backend.loglikelihood(LL_REQUESTS))


# ------------------------------------------------------------------ 8. malformed answers


@pytest.mark.parametrize("fault, problem", [
    ("not_json", "not JSON (Expecting ',' delimiter at line 1 column 26)"),
    ("not_utf8", "not UTF-8 (byte 0xff at position 35)"),
    ("nested", "JSON nested too deeply to be an answer"),
    ("nan_literal", "the answer: 'choices' is a number, not an array: 'NaN'"),
    ("no_choices", "the answer: no 'choices'"),
    ("list_answer", "an array, not an object"),
    ("null_text", "prompt 0 of the batch: 'text' is null"),
    ("bad_token_ids", "prompt 0 of the batch: 'token_ids' is '[1000000000]', not a list of token ids below"),
])
def test_malformed_answers_are_one_line_naming_the_server(tiny_model: Path, server: FakeServer, key_in_env, fault: str, problem: str) -> None:
    server.lie(fault)
    backend = make_backend("openai-completions", tiny_model, server.url, max_retries=1)
    fails_with(lambda: backend.generate_until([GenRequest(f"d {i}", (), 3) for i in range(2)]),
               f"server {server.url}/completions failed 2 times; last error: malformed answer: {problem}", "[generation batch 1/1, 2 prompts]")
    assert len(server.seen) == 2  # retried once


@pytest.mark.parametrize("fault, problem", [
    ("chat_two", "2 choices for the 1 prompts sent"),
    ("chat_content_number", "the choice: 'message.content' is a number, not a string"),
    ("chat_no_message", "the choice: no 'message'"),
    ("not_json", "not JSON"),
])
def test_chat_answers_are_checked_the_same_way(tiny_model: Path, server: FakeServer, key_in_env, fault: str, problem: str) -> None:
    backend = make_backend("openai-chat", tiny_model, server.url)
    assert backend.generate_until([GenRequest("ciao", (), 3)]) == ["risposta 1: 4"]
    server.lie(fault)
    fails_with(lambda: backend.generate_until([GenRequest("ciao", (), 3), GenRequest("a", (), 3)]),
               f"server {server.url}/chat/completions failed 1 time; last error: malformed answer: {problem}", "[chat request 1/2]")


# ------------------------------------------------------------------ end to end: evalita-eval run


def _files(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text("utf-8") for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def cli(tiny_model: Path, server: FakeServer, key_in_env, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``evalita-eval run`` on te (log-likelihoods) and sum (generations) against the fake server."""
    from evalita_eval.cli import main

    monkeypatch.setattr(oai, "BACKOFF_BASE_S", 0.01)  # retries without the real backoff's seconds

    def run(out: Path, *extra: str) -> Any:
        return CliRunner().invoke(main, [
            "run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "te,sum", "--limit", "3", "--max-new-tokens", "6",
            "--backend", "openai-completions", "--base-url", server.url, "--api-key-env", KEY_ENV, "--batch-size", "2",
            "--concurrency", "1", "--output-dir", str(out), "--no-progress", *extra,
        ])

    return run


@pytest.fixture
def clean_run(cli: Callable[..., Any], server: FakeServer, tmp_path: Path) -> dict[str, str]:
    result = cli(tmp_path / "clean")
    assert result.exit_code == 0, result.output
    files = _files(tmp_path / "clean")
    assert json.loads(files["results.json"])["status"] == "complete"
    server.seen.clear()
    return files


def _same_run(a: dict[str, str], b: dict[str, str]) -> None:
    """Equal outputs: the same samples and scores, the same cache lines (in any order)."""
    assert a.keys() == b.keys()
    for name in a:
        if name == "cache.jsonl":
            assert sorted(a[name].splitlines()) == sorted(b[name].splitlines())
        elif name == "results.json":
            ra, rb = json.loads(a[name]), json.loads(b[name])
            assert (ra["status"], ra["results"]) == (rb["status"], rb["results"])
        else:
            assert a[name] == b[name], name


@pytest.mark.parametrize("fault", ["fewer", "bos", "nan", "null_text", "not_json"])
def test_run_against_a_lying_server_stops_with_one_line_and_keeps_nothing_of_the_lie(
        cli: Callable[..., Any], server: FakeServer, clean_run: dict[str, str], tmp_path: Path, fault: str) -> None:
    server.lie(fault, first=3)  # three honest answers, then the lie for good
    result = cli(tmp_path / "lied", "--max-retries", "2")
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith(f"Error: ServerError: server {server.url}/completions failed 3 times; last error: malformed answer: "), lines[-1]
    assert API_KEY not in result.output
    got = _files(tmp_path / "lied")
    # What was kept is what a clean run says: cache lines, sample files, finished tasks.
    assert set(got.get("cache.jsonl", "").splitlines()) <= set(clean_run["cache.jsonl"].splitlines())
    for name, text in got.items():
        if name.startswith("samples/"):
            assert text == clean_run[name], name
    if "results.json" in got:
        doc, clean = json.loads(got["results.json"]), json.loads(clean_run["results.json"])
        assert doc["status"] == "partial" and all(doc["results"][t] == clean["results"][t] for t in doc["results"])
    assert not any(w in text for text in got.values() for w in ("NaN", "Infinity"))


@pytest.mark.parametrize("fault", ["fewer", "bos", "nan", "503", "drip_body"])
def test_run_after_transient_lies_equals_a_clean_run(cli: Callable[..., Any], server: FakeServer, clean_run: dict[str, str], tmp_path: Path,
                                                     fault: str) -> None:
    server.lie(fault, first=1, count=2)  # the 2nd and 3rd requests lie, retries get the truth
    result = cli(tmp_path / "retried", "--max-retries", "2", "--timeout", "1.5")
    assert result.exit_code == 0, result.output
    _same_run(clean_run, _files(tmp_path / "retried"))

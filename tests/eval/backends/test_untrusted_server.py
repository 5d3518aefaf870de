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
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest
from click.testing import CliRunner

from evalita_eval.api import Backend, BackendOptions, Capabilities, GenRequest, LLRequest, LLResult, check_ll_result
from evalita_eval.backends import create_backend
from evalita_eval.backends import openai as oai
from run_options import options_as_run_builds
from paths import TEST_DATA
from fake_openai_server import FakeServer

DATA = TEST_DATA / "build"
KEY_ENV = "EVALITA_TEST_UNTRUSTED_KEY"
API_KEY = "sk-evalita-untrusted-3f9a27c1d8e4b6a0"
LL_REQUESTS = [LLRequest("Qual è la capitale d'Italia?", c) for c in (" Roma", " Milano e Busseto", " Napoli")]


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
    backend = create_backend(kind, options_as_run_builds(kind, model=str(model), base_url=url, api_key_env=KEY_ENV, **options))  # as `run` builds them
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
                          "give the final address as --backend-arg base_url [generation batch 1/1, 1 prompts]")
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
    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.run_config import RunSpec
    from evalita_eval.sources.entries import select_entries
    from evalita_eval.sources.folder import FolderSource

    out = tmp_path / "res"
    runner = Runner(_NaNBackend(), ModelInfo("m", None, "none", "nan-stub"), FolderSource(str(DATA)), RunSpec(model="m", data="data", progress=False, limit=2), out)
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
            "--backend", "openai-completions", "--backend-arg", f"base_url={server.url}", "--backend-arg", f"api_key_env={KEY_ENV}", "--batch-size", "2",
            "--backend-arg", "concurrency=1", "--output-dir", str(out), "--no-progress", *extra,
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
    result = cli(tmp_path / "lied", "--backend-arg", "max_retries=2")
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
    result = cli(tmp_path / "retried", "--backend-arg", "max_retries=2", "--backend-arg", "timeout_s=1.5")
    assert result.exit_code == 0, result.output
    _same_run(clean_run, _files(tmp_path / "retried"))

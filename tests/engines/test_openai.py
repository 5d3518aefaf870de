"""--backend openai-completions / openai-chat against a real vLLM OpenAI server on 127.0.0.1,
and the client's retries against a small loopback HTTP server.

The vLLM part is skipped without vLLM; ``.ci/run`` runs it in ``.venv-vllm``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from .engine_helpers import API_KEY, assert_same_run, ll_close, requires_vllm, run_in_process
from evalita_eval.api import BackendOptions, BackendUnsupported, GenRequest, LLRequest
from evalita_eval.backends import create_backend
from run_options import options_as_run_builds

KEY_ENV = "EVALITA_TEST_OPENAI_KEY"


def _backend(name: str, model: Path, url: str, **options):
    return create_backend(name, options_as_run_builds(name, model=str(model), base_url=url, api_key_env=KEY_ENV, **options))  # as `run` builds them


@pytest.fixture
def key_in_env(monkeypatch):
    monkeypatch.setenv(KEY_ENV, API_KEY)


# ------------------------------------------------------------------ against vLLM's server


@requires_vllm
def test_completions_equal_hf(tiny32: Path, hf32, vllm_server: str, key_in_env) -> None:
    backend = _backend("openai-completions", tiny32, vllm_server, batch_size=3)
    reqs = [LLRequest(c, x) for c in ("Qual è la capitale d'Italia?", "Il sentimento del tweet è ") for x in (" Roma", " Milano e Busseto", "positivo")]
    reqs.append(LLRequest("", "Giuseppe Verdi nacque a Busseto"))
    for req, a, b in zip(reqs, hf32.loglikelihood(reqs), backend.loglikelihood(reqs)):
        assert (a.n_tokens, a.is_greedy) == (b.n_tokens, b.is_greedy), req
        assert ll_close(a.logprob, b.logprob), (req, a.logprob, b.logprob)
    gens = [GenRequest(c, stop, n) for c in ("Elenca i sinonimi: casa,", "Qual è la capitale d'Italia?") for stop, n in (((), 10), ((",",), 20))]
    assert backend.generate_until(gens) == hf32.generate_until(gens)
    backend.close()


@requires_vllm
def test_completions_every_task_and_prompt_same_results_as_hf(tiny32: Path, hf32, vllm_server: str, key_in_env, tmp_path: Path, capsys) -> None:
    """--limit 10 on every task and prompt through the server: the same results.json as hf;
    and the API key appears nowhere: not in results, samples, cache, or the console."""
    config = {"limit": 10, "max_new_tokens": 24}
    run_in_process(hf32, "hf", tiny32, tmp_path / "hf", **config)
    backend = _backend("openai-completions", tiny32, vllm_server, concurrency=4, batch_size=8)
    got = run_in_process(backend, "openai-completions", tiny32, tmp_path / "api", **config)
    backend.close()
    assert got["model"]["backend"] == "openai-completions"
    assert assert_same_run(tmp_path / "hf", tmp_path / "api") == 366  # every choice of every MC item
    written = [p for p in (tmp_path / "api").rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"results.json", "cache.jsonl"}
    for p in written:
        assert API_KEY not in p.read_text("utf-8"), p
    out = capsys.readouterr()
    assert API_KEY not in out.out + out.err


@requires_vllm
def test_chat_generation_equals_hf_with_chat_template(tiny32: Path, hf32, vllm_server: str, key_in_env, tmp_path: Path) -> None:
    """openai-chat sends the turns; the server's template renders them as HF's does."""
    backend = _backend("openai-chat", tiny32, vllm_server)
    config = {"limit": 3, "max_new_tokens": 12, "num_fewshot": 1, "apply_chat_template": True, "tasks": ["ner", "ls", "sum"]}
    hf_dir, api_dir = tmp_path / "hf", tmp_path / "chat"
    run_in_process(hf32, "hf", tiny32, hf_dir, **config)
    run_in_process(backend, "openai-chat", tiny32, api_dir, **config)
    for name in sorted(p.name for p in (hf_dir / "samples").iterdir()):
        a = [json.loads(x) for x in (hf_dir / "samples" / name).read_text("utf-8").splitlines()]
        b = [json.loads(x) for x in (api_dir / "samples" / name).read_text("utf-8").splitlines()]
        assert [s["generation"] for s in a] == [s["generation"] for s in b], name
        assert b[0]["prompt"].startswith("<|user|>\n") and b[0]["prompt"].count("<|assistant|>\n") == 1
    assert json.loads((api_dir / "results.json").read_text())["results"] == json.loads((hf_dir / "results.json").read_text())["results"]
    with pytest.raises(BackendUnsupported, match="openai-chat cannot score multiple-choice tasks"):
        backend.loglikelihood([LLRequest("a", " b")])
    backend.close()


@requires_vllm
def test_wrong_key_is_a_clear_error_without_the_key(tiny32: Path, vllm_server: str, monkeypatch) -> None:
    from evalita_eval.backends.openai import ServerError

    wrong = "sk-wrong-" + API_KEY[::-1]
    monkeypatch.setenv(KEY_ENV, wrong)
    backend = _backend("openai-completions", tiny32, vllm_server)
    with pytest.raises(ServerError, match="HTTP 401") as err:
        backend.generate_until([GenRequest("ciao", (), 2)])
    assert wrong not in str(err.value) and API_KEY not in str(err.value)
    assert wrong not in repr(backend.client)


# ------------------------------------------------------------------ client behaviour, loopback server


class _Flaky(BaseHTTPRequestHandler):
    """Answers the first ``fail`` POSTs with ``status`` (a Retry-After of 0), then echoes the body back as a completion."""

    fail = 0
    status = 503
    seen: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"auth": self.headers.get("Authorization"), "body": body})
        if type(self).fail > 0:
            type(self).fail -= 1
            self.send_response(self.status)
            self.send_header("Retry-After", "0")
            self.end_headers()
            self.wfile.write(b'{"error": "busy"}')
            return
        reply = {"choices": [{"index": i, "text": f"risposta {i}, fine"} for i in range(len(body["prompt"]))]}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def flaky_server():
    _Flaky.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _client_backend(tiny_model: Path, url: str, **options):
    backend = _backend("openai-completions", tiny_model, url, **options)
    backend.client.sleep = lambda s: None  # the backoff schedule is checked, not slept
    return backend


def test_retries_on_503_then_succeeds_in_batches(tiny_model: Path, flaky_server, key_in_env) -> None:
    server, url = flaky_server
    _Flaky.fail, _Flaky.status = 2, 503
    backend = _client_backend(tiny_model, url, batch_size=2, concurrency=1)
    slept = []
    backend.client.sleep = slept.append
    got = backend.generate_until([GenRequest(f"domanda {i}", (",",), 5) for i in range(3)])
    assert got == ["risposta 0", "risposta 1", "risposta 0"]  # two HTTP batches: [0, 1], [2]
    assert slept == [0.5, 1.0]
    assert [len(s["body"]["prompt"]) for s in _Flaky.seen] == [2, 2, 2, 1]
    assert all(s["auth"] == f"Bearer {API_KEY}" for s in _Flaky.seen)
    assert all(isinstance(s["body"]["prompt"][0], list) for s in _Flaky.seen)  # token ids, our tokenisation


def test_gives_up_after_max_retries_and_never_retries_400(tiny_model: Path, flaky_server, key_in_env) -> None:
    from evalita_eval.backends.openai import ServerError

    server, url = flaky_server
    _Flaky.fail, _Flaky.status = 10, 429
    backend = _client_backend(tiny_model, url, max_retries=3)
    with pytest.raises(ServerError, match="failed 4 times; last error: HTTP 429"):
        backend.generate_until([GenRequest("x", (), 1)])
    assert len(_Flaky.seen) == 4
    _Flaky.seen, _Flaky.fail, _Flaky.status = [], 10, 400
    with pytest.raises(ServerError, match="refused the request: HTTP 400"):
        backend.generate_until([GenRequest("x", (), 1)])
    assert len(_Flaky.seen) == 1


def test_connection_refused_is_retried_then_reported(tiny_model: Path, key_in_env) -> None:
    from .engine_helpers import free_port
    from evalita_eval.backends.openai import ServerError

    backend = _client_backend(tiny_model, f"http://127.0.0.1:{free_port()}/v1", max_retries=2)
    with pytest.raises(ServerError, match="failed 3 times; last error: ConnectionRefusedError"):
        backend.generate_until([GenRequest("x", (), 1)])


def test_missing_key_variable_and_base_url_are_clear_errors(tiny_model: Path, monkeypatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ValueError, match=f"names the environment variable {KEY_ENV}, which is not set"):
        _backend("openai-completions", tiny_model, "http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="needs --backend-arg base_url=URL"):
        create_backend("openai-chat", BackendOptions(model=str(tiny_model)))

"""The resume cache is keyed on the backend's whole identity (``Backend.cache_identity``).

A rerun into the same output folder with another value of any option that can change a
number computes every request again; with the same options (or options that only change
speed) it reads everything back. Local model folders are identified by their files' content.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner

from evalita_eval.cli import main

from paths import TEST_DATA

DATA = TEST_DATA / "build"
COUNTS = re.compile(r"^(\d+) requests computed, (\d+) read from the cache", re.M)
# te, 2 documents, every prompt: 6 prompts x 2 documents x 2 choices.
TE_REQUESTS = 24


def _run(out: Path, model: Path, *args: str) -> tuple[int, int]:
    """(computed, read from the cache) of one `run` of te on 2 documents into ``out``."""
    result = CliRunner().invoke(main, ["run", "--model", str(model), "--data", str(DATA), "--tasks", "te", "--limit", "2",
                                       "--no-progress", "--output-dir", str(out), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    found = COUNTS.search(result.output)
    assert found, result.output
    return int(found[1]), int(found[2])


@pytest.fixture(scope="module")
def model_copy(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tiny model that the tests of this module may change (each test copies it again)."""
    return Path(shutil.copytree(tiny_model, tmp_path_factory.mktemp("model") / "tiny"))


@pytest.fixture(scope="module")
def baseline(model_copy: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An output folder holding one finished run of te with the default options."""
    out = tmp_path_factory.mktemp("baseline") / "out"
    assert _run(out, model_copy) == (TE_REQUESTS, 0)
    return out


@pytest.fixture
def rerun(baseline: Path, model_copy: Path, tiny_model: Path, tmp_path: Path):
    """Rerun into a copy of the baseline's output folder, on the baseline's model path, after ``change``."""
    out = Path(shutil.copytree(baseline, tmp_path / "out"))

    def go(*args: str, change=None) -> tuple[int, int]:
        if change is not None:
            change(model_copy)
        return _run(out, model_copy, "--overwrite", *args)  # another identity's folder: its results replaced, its cache kept

    yield go
    shutil.rmtree(model_copy)
    shutil.copytree(tiny_model, model_copy)  # the next test starts from the baseline's model


@pytest.mark.parametrize("args", [(), ("--batch-size", "3"), ("--threads", "1"), ("--dtype", "float32"), ("--seed", "1234"), ("--device", "auto")],
                         ids=["same", "batch-size", "threads", "dtype-resolved-equal", "seed-default", "device-auto-on-cpu"])
def test_same_numbers_read_everything_back(rerun, args: tuple[str, ...]) -> None:
    """Identical options, or options that cannot change a number (batch size and threads: see
    HFBackend.cache_identity for the measurement), read every request back."""
    assert rerun(*args) == (0, TE_REQUESTS)


@pytest.mark.parametrize("args", [("--max-length", "40"), ("--dtype", "bfloat16"), ("--trust-remote-code",), ("--revision", "main")],
                         ids=["max-length", "dtype", "trust-remote-code", "revision"])
def test_an_option_that_changes_numbers_recomputes(rerun, args: tuple[str, ...]) -> None:
    assert rerun(*args) == (TE_REQUESTS, 0)


def _replace_weights(folder: Path) -> None:
    from tiny_model import build_tiny_model

    other = build_tiny_model(folder.parent / "other-weights", seed=1)
    shutil.copyfile(other / "model.safetensors", folder / "model.safetensors")


def _new_chat_template(folder: Path) -> None:
    path = folder / "chat_template.jinja"
    path.write_text(path.read_text("utf-8").replace("<|assistant|>", "<|bot|>"), "utf-8")


def _touch_and_readme(folder: Path) -> None:
    import os

    for p in folder.iterdir():
        os.utime(p, (1, 1))
    (folder / "README.md").write_text("a model card cannot change a number\n", "utf-8")


@pytest.mark.parametrize("change, computed", [(_replace_weights, TE_REQUESTS), (_new_chat_template, TE_REQUESTS), (_touch_and_readme, 0)],
                         ids=["weights-replaced-in-place", "chat-template-edited", "mtimes-and-readme"])
def test_a_local_model_is_identified_by_its_files(rerun, change, computed: int) -> None:
    assert rerun(change=change) == (computed, TE_REQUESTS - computed)


def test_results_record_the_identity_without_secrets(baseline: Path, model_copy: Path) -> None:
    from evalita_eval.backend_support.identity import folder_fingerprint, identity_key

    model = json.loads((baseline / "results.json").read_text("utf-8"))["model"]
    key = model.pop("cache_key")
    model.pop("name")  # how outputs name the model (--model-name): no part of the identity
    assert model.pop("num_parameters") > 0  # a fact of the weights their fingerprint already identifies
    assert key == identity_key(model)
    assert model["files_sha256"] == folder_fingerprint(model_copy) and model["backend"] == "hf"
    assert (model["dtype"], model["max_length"], model["device"], model["revision"]) == ("float32", 2048, "cpu", None)
    assert model["chat_template_sha256"] is not None and model["options"] == {"gguf_file": None}
    assert "batch_size" not in model and "threads" not in model


# ------------------------------------------------------------------ server backends


class _Completions(BaseHTTPRequestHandler):
    """/v1/completions with echoed prompt log-probs: every token -1.0, the best alternative -0.5."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        choices = []
        for i, ids in enumerate(body["prompt"]):
            n = len(ids)
            choices.append({"index": i, "text": "", "finish_reason": "length", "logprobs": {
                "tokens": [str(t) for t in ids], "token_logprobs": [None] + [-1.0] * (n - 1),
                "top_logprobs": [None] + [{"x": -0.5}] * (n - 1), "text_offset": list(range(n))}})
        data = json.dumps({"id": "c", "object": "text_completion", "model": body["model"], "choices": choices}).encode()
        self.send_response(200)
        for header, value in (("Content-Type", "application/json"), ("Content-Length", str(len(data)))):
            self.send_header(header, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def two_servers() -> Iterator[list[str]]:
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _Completions) for _ in range(2)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for t in threads:
        t.start()
    yield [f"http://127.0.0.1:{s.server_address[1]}/v1" for s in servers]
    for s, t in zip(servers, threads):
        s.shutdown()
        s.server_close()
        t.join()


def test_server_url_and_backend_args_are_in_the_key(two_servers: list[str], tiny_model: Path, tmp_path: Path) -> None:
    first, second = two_servers
    out = tmp_path / "out"
    common = ("--backend", "openai-completions", "--overwrite")  # each server its own run: its results replaced, the cache kept
    assert _run(out, tiny_model, *common, "--backend-arg", f"base_url={first}") == (TE_REQUESTS, 0)
    assert _run(out, tiny_model, *common, "--backend-arg", f"base_url={first}/", "--backend-arg", "concurrency=1", "--backend-arg", "timeout_s=30") == (0, TE_REQUESTS)
    assert _run(out, tiny_model, *common, "--backend-arg", f"base_url={second}") == (TE_REQUESTS, 0)
    assert _run(out, tiny_model, *common, "--backend-arg", f"base_url={first}", "--backend-arg", "server_token_ids=false") == (TE_REQUESTS, 0)
    model = json.loads((out / "results.json").read_text("utf-8"))["model"]
    assert (model["base_url"], model["served_model"], model["dtype"]) == (first, str(tiny_model), "server")
    assert "device" not in model and model["options"] == {"server_token_ids": False}  # not the key's variable, concurrency...


def test_vllm_identity_keeps_what_changes_numbers(tiny_model: Path) -> None:
    """Tensor parallelism and engine arguments are in vLLM's identity; data parallelism, the GPU
    memory fraction and the engine's max model length (scheduling only) are not. No engine runs."""
    from dataclasses import replace

    from transformers import AutoTokenizer

    from evalita_eval.api import BackendOptions
    from evalita_eval.backend_support.options import resolve_options
    from evalita_eval.backends.vllm import VLLMBackend

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    base = BackendOptions(model=str(tiny_model), dtype="float32")

    def identity(**changes) -> dict:
        backend = VLLMBackend(None, tokenizer, str(tiny_model), 2048, "float32")
        backend.options = resolve_options(VLLMBackend, replace(base, **changes))[0]
        return backend.cache_identity()

    same = identity()
    assert same["options"] == {"tensor_parallel_size": 1, "vllm_engine_args": None, "gguf_file": None, "vllm_loglikelihood": "prefill"}
    assert "device" not in same and same["max_length"] == 2048
    for changed in ({"extra": {"tensor_parallel_size": 2}}, {"extra": {"vllm_engine_args": {"quantization": "fp8"}}},
                    {"extra": {"vllm_loglikelihood": "prompt_logprobs"}}, {"extra": {"vllm_loglikelihood": "prefix"}}):
        assert identity(**changed) != same, changed
    for unchanged in ({"extra": {"data_parallel_size": 2}}, {"extra": {"gpu_memory_utilization": 0.5}}, {"extra": {"max_model_len": 4096}}, {"batch_size": 1}):
        assert identity(**unchanged) == same, unchanged


def test_a_hub_model_is_identified_by_its_snapshot_commit() -> None:
    """A Hub id: id, revision and the commit of the downloaded snapshot (read offline from the HF cache,
    which tests/conftest.py points into a temporary folder); None when not downloaded."""
    from huggingface_hub import constants

    from evalita_eval.backend_support.identity import model_source_identity

    repo = Path(constants.HF_HUB_CACHE) / "models--evalita-test--snapshot-model"
    for commit, ref in (("a" * 40, "main"), ("b" * 40, "v2")):
        (repo / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
        (repo / "snapshots" / commit / "config.json").write_text("{}", "utf-8")
        (repo / "refs").mkdir(exist_ok=True)
        (repo / "refs" / ref).write_text(commit, "utf-8")
    assert model_source_identity("evalita-test/snapshot-model", None) == {"name_or_path": "evalita-test/snapshot-model", "revision": None, "commit": "a" * 40}
    assert model_source_identity("evalita-test/snapshot-model", "v2")["commit"] == "b" * 40
    assert model_source_identity("evalita-test/not-downloaded", None)["commit"] is None
    assert model_source_identity("gpt-4o-mini", None)["commit"] is None  # a hosted API model: no Hub repository


def test_a_single_model_file_is_identified_by_its_content(tmp_path: Path) -> None:
    from evalita_eval.backend_support.identity import model_source_identity

    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(100))
    before = model_source_identity(str(path), None)
    assert before == {"name_or_path": str(path), "file_sha256": __import__("hashlib").sha256(b"GGUF" + bytes(100)).hexdigest()}
    path.write_bytes(b"GGUF" + bytes(99) + b"\1")  # replaced in place, same size
    assert model_source_identity(str(path), None) != before


def test_the_sha256_memo_skips_unchanged_files_and_sees_every_write(tmp_path: Path, monkeypatch) -> None:
    import os

    from evalita_eval.backend_support import identity

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"w" * 1000)
    (folder / "config.json").write_text("{}", "utf-8")
    plain = identity.folder_fingerprint(folder, identity.Sha256Memo(tmp_path / "unused" / "memo.json"))
    reads: list[str] = []
    real = identity.file_sha256
    monkeypatch.setattr(identity, "file_sha256", lambda p: reads.append(Path(p).name) or real(p))
    memo_file = tmp_path / "memo.json"
    # Just written files are "racy": hashed every time, never remembered.
    assert identity.folder_fingerprint(folder, identity.Sha256Memo(memo_file)) == plain and len(reads) == 2
    assert not memo_file.exists()
    monkeypatch.setattr(identity.Sha256Memo, "racy_s", 0.0)
    assert identity.folder_fingerprint(folder, identity.Sha256Memo(memo_file)) == plain and len(reads) == 4
    reads.clear()
    assert identity.folder_fingerprint(folder, identity.Sha256Memo(memo_file)) == plain and reads == []  # read from the memo
    # The same size and modification time, other content: the status-change time moved, so it is hashed again.
    weights = folder / "model.safetensors"
    st = weights.stat()
    weights.write_bytes(b"x" * 1000)
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    changed = identity.folder_fingerprint(folder, identity.Sha256Memo(memo_file))
    assert changed != plain and reads == ["model.safetensors"]
    # A damaged memo is ignored (everything hashed again), never an error, and rewritten sound.
    memo_file.write_text('{"' + str(weights.resolve()) + '": [[1, 2, 3, 4, 5], "not a digest"]}', "utf-8")
    reads.clear()
    assert identity.folder_fingerprint(folder, identity.Sha256Memo(memo_file)) == changed and sorted(reads) == ["config.json", "model.safetensors"]
    assert all(identity._memo_entry_ok(v) for v in json.loads(memo_file.read_text("utf-8")).values())

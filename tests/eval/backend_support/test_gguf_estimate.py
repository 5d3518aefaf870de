"""GGUF model names and errors (eval/backend_support/gguf.py) without a real file, the run plan and time estimate
printed before a run (eval/running/estimate.py), and --device's default. The real GGUF file itself is
loaded and compared with its float32 conversion in tests/realmodel."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_eval.api import BackendOptions
from evalita_eval.backends.vllm import engine_kwargs
from evalita_eval.cli import main
from evalita_eval.cli.support import default_device
from evalita_eval.running.estimate import GEN, LL, TaskPlan, TimeEstimate, TokenCounter, fit_cost, scoring_work
from evalita_eval.backend_support.gguf import gguf_model, pretrained_source
from evalita_eval.backend_support.identity import gguf_identity

from paths import TESTS

HERE = TESTS
DATA = HERE / "data" / "build"


@pytest.fixture
def fake_gguf(tmp_path: Path) -> Path:
    """A file named .gguf (its content is never parsed here)."""
    path = tmp_path / "models" / "Model.Q4_1.gguf"
    path.parent.mkdir()
    path.write_bytes(b"GGUF" + bytes(range(256)) * 8)
    return path


def test_gguf_model_names_the_folder_and_file(fake_gguf: Path, tmp_path: Path) -> None:
    found = gguf_model(str(fake_gguf))
    assert (found.source, found.file, found.local_path) == (str(fake_gguf.parent), "Model.Q4_1.gguf", fake_gguf)
    assert pretrained_source(str(fake_gguf), found) == (str(fake_gguf.parent), {"gguf_file": "Model.Q4_1.gguf"})
    hub = gguf_model("org/Model-GGUF", {"gguf_file": "model.Q8_0.gguf"})
    assert (hub.source, hub.file, hub.local_path) == ("org/Model-GGUF", "model.Q8_0.gguf", None)
    local = gguf_model(str(fake_gguf.parent), {"gguf_file": fake_gguf.name})
    assert local.local_path == fake_gguf
    assert gguf_model(str(tmp_path)) is None and gguf_model("org/name", {"other": "x"}) is None


@pytest.mark.parametrize("model, extra, error", [
    ("missing.gguf", {}, "--model missing.gguf: no such GGUF file"),
    ("org/m", {"gguf_file": "weights.bin"}, "expected the name of a .gguf file inside org/m"),
    ("org/m", {"gguf_file": "../up.gguf"}, "expected the name of a .gguf file inside org/m"),
])
def test_gguf_model_errors_say_what_was_expected(model: str, extra: dict, error: str) -> None:
    with pytest.raises((ValueError, FileNotFoundError), match=re.escape(error)):
        gguf_model(model, extra)


def test_gguf_named_twice_is_refused(fake_gguf: Path) -> None:
    with pytest.raises(ValueError, match="is a GGUF file already; drop --backend-arg gguf_file=x.gguf"):
        gguf_model(str(fake_gguf), {"gguf_file": "x.gguf"})


def test_gguf_identity_is_the_file_sha256(fake_gguf: Path, tmp_path: Path, monkeypatch) -> None:
    """A local .gguf is identified by its content (identity.model_source_identity); a Hub GGUF by the
    sha256 of the file in the local Hub cache (gguf_identity), None when it is not there."""
    from evalita_eval.backend_support.identity import model_source_identity

    digest = hashlib.sha256(fake_gguf.read_bytes()).hexdigest()
    assert model_source_identity(str(fake_gguf), None)["file_sha256"] == digest
    assert gguf_identity(str(fake_gguf), None) is None  # covered above, not hashed twice
    # A Hub cache holding org/m-GGUF's file (the layout huggingface_hub reads).
    import huggingface_hub.constants as hub_constants

    hub = tmp_path / "hub"
    snapshot = hub / "models--org--m-GGUF" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "m.Q4_1.gguf").write_bytes(b"GGUF hub weights")
    (hub / "models--org--m-GGUF" / "refs").mkdir()
    (hub / "models--org--m-GGUF" / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(hub))
    assert gguf_identity("org/m-GGUF", None, {"gguf_file": "m.Q4_1.gguf"}) == {
        "gguf_file": "m.Q4_1.gguf", "gguf_sha256": hashlib.sha256(b"GGUF hub weights").hexdigest()}
    assert gguf_identity("org/never-downloaded", None, {"gguf_file": "m.gguf"}) == {"gguf_file": "m.gguf", "gguf_sha256": None}
    assert gguf_identity("org/plain", None) is None


def test_vllm_takes_the_gguf_file_as_model_and_tokenizer(fake_gguf: Path) -> None:
    kw = engine_kwargs(BackendOptions(model=str(fake_gguf)), 2048)
    assert kw["model"] == kw["tokenizer"] == str(fake_gguf)
    kw = engine_kwargs(BackendOptions(model="org/M-GGUF", extra={"gguf_file": "m.Q4_K_M.gguf"}), 2048)
    assert kw["model"] == kw["tokenizer"] == "org/M-GGUF/m.Q4_K_M.gguf"
    kw = engine_kwargs(BackendOptions(model="org/plain"), 2048)
    assert kw["model"] == kw["tokenizer"] == "org/plain"


def test_cli_missing_gguf_file_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--model", str(tmp_path / "nope.gguf"), "--data", str(DATA), "--tasks", "te"])
    assert result.exit_code == 2
    assert "nope.gguf: no such GGUF file" in result.output and "JSON" not in result.output


def test_cli_gguf_without_the_gguf_package_is_an_install_hint(fake_gguf: Path, monkeypatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    result = CliRunner().invoke(main, ["run", "--model", str(fake_gguf), "--data", str(DATA), "--tasks", "te"])
    assert result.exit_code == 1
    assert f"--model {fake_gguf} needs the gguf package: pip install -e '.[gguf]' (in a clone of evalita-llm)" in result.output


def test_gguf_file_in_a_hub_id_reaches_from_pretrained(tiny_model: Path) -> None:
    """--backend-arg gguf_file=NAME is passed to transformers (a folder without that file: its own error, not a config one)."""
    pytest.importorskip("gguf")
    from evalita_eval.backends.hf import load_hf

    with pytest.raises(OSError, match="tiny.Q4_1.gguf"):
        load_hf(BackendOptions(model=str(tiny_model), extra={"gguf_file": "tiny.Q4_1.gguf"}))


def test_default_device_is_the_gpu_when_torch_sees_one(monkeypatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_device() == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert default_device() == "cpu"


# -- the plan and the time estimate -------------------------------------------------------------


def test_run_prints_the_plan_that_the_run_then_sends(tiny_model: Path, tmp_path: Path) -> None:
    """Requests, prompt tokens (the tokenizer's count of every context and continuation) and max new
    tokens per task, equal to what the run's samples hold; the default device (cpu here) is recorded."""
    from transformers import AutoTokenizer

    out = tmp_path / "o"
    result = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "te,ner", "--limit", "2",
                                       "--max-new-tokens", "8", "--output-dir", str(out), "--no-progress"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text("utf-8"))
    assert doc["config"]["device"] == "cpu"
    tok = AutoTokenizer.from_pretrained(tiny_model)
    count = lambda text: len(tok.encode(text, add_special_tokens=False))  # noqa: E731
    rows = {m.group(1): m.groups()[1:] for m in re.finditer(r"^(\w+)\s+(loglik|generate)\s+([\d,]+)\s+([\d,]+)(?:\s+([\d,]+))?$", result.output, re.M)}
    requests = tokens = 0
    for name, kind in (("te", "loglik"), ("ner_adg", "generate"), ("ner_fic", "generate"), ("ner_wn", "generate")):
        samples = [json.loads(x) for f in sorted((out / "samples").glob(f"{name}_p*.jsonl")) for x in f.read_text("utf-8").splitlines()]
        if kind == "loglik":
            n = sum(len(s["choices"]) for s in samples)
            t = sum(len(s["choices"]) * count(s["prompt"]) + sum(count(" " + c) for c in s["choices"]) for s in samples)
            assert rows[name] == (kind, f"{n:,}", f"{t:,}", None)
        else:
            n, t = len(samples), sum(count(s["prompt"]) for s in samples)
            assert rows[name] == (kind, f"{n:,}", f"{t:,}", "8")  # the budget of one request, not a total
        requests, tokens = requests + n, tokens + t
    total = re.search(r"^total\s+([\d,]+)\s+([\d,]+)$", result.output, re.M)
    assert total is not None and total.groups() == (f"{requests:,}", f"{tokens:,}")
    assert f"({requests} in all)" in result.output
    assert re.search(r"^estimate: about \d+ s left for the log-likelihoods \(", result.output, re.M)


def test_a_rerun_plans_only_what_the_resume_cache_lacks(tiny_model: Path, tmp_path: Path) -> None:
    """A rerun with a larger --limit: the plan counts the requests of the first run's documents as
    read back, and the time estimate covers only the new ones."""
    out = tmp_path / "o"
    args = ["run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "te", "--output-dir", str(out), "--no-progress"]
    first = CliRunner().invoke(main, [*args, "--limit", "2"], catch_exceptions=False)
    assert first.exit_code == 0 and "resume:" not in first.output
    done = sum(len(json.loads(x)["choices"]) for f in (out / "samples").glob("te_p*.jsonl") for x in f.read_text("utf-8").splitlines())
    again = CliRunner().invoke(main, [*args, "--limit", "3", "--overwrite"], catch_exceptions=False)  # another run: its cache kept
    assert again.exit_code == 0, again.output
    total = int(re.search(r"^total\s+([\d,]+)\s", again.output, re.M).group(1).replace(",", ""))
    assert done == 2 * 6 * 2 and total == 3 * 6 * 2  # te: two choices, six prompts
    assert f"resume: {done:,} of these {total:,} requests are in the resume cache and are read back; {total - done:,} are computed" in again.output
    assert f"{total - done} requests computed, {done} read from the cache" in again.output
    same = CliRunner().invoke(main, [*args, "--limit", "3"], catch_exceptions=False)
    assert f"resume: {total:,} of these {total:,} requests are in the resume cache and are read back; 0 are computed (0 prompt tokens)" in same.output
    assert "estimate:" not in same.output  # nothing reaches the model: nothing to time


def test_time_estimate_from_the_first_measured_requests() -> None:
    from evalita_eval.api import GenRequest, LLRequest

    clock, printed = [0.0], []
    plans = [TaskPlan("te", LL, 100, 2100, rows=100, row_tokens=2000), TaskPlan("ner", GEN, 40, 4000, 64)]
    estimate = TimeEstimate(plans, printed.append, every_s=60, clock=lambda: clock[0])
    assert estimate.line() == ("estimate: time left not known yet (40 of 40 generations left (6,560 budget tokens); "
                               "log-likelihoods and generations not measured yet)")
    clock[0] += 15
    # Characters / 4 without a tokenizer: 19 context tokens + 2 continuation tokens - the last = a row of 20 tokens.
    estimate.record(LL, [LLRequest("x" * 76, " abcdef")] * 10, 15.0)  # 10 rows, 200 tokens: 5 s + 10 s of warm-up
    assert printed == []  # the first call alone carries the run's one-time costs: no rate from it (1,800 tokens at 13/s)
    clock[0] += 5
    estimate.record(LL, [LLRequest("x" * 76, " abcdef")] * 10, 5.0)  # 10 rows, 200 tokens in 5 s
    assert printed == ["estimate: about 40 s left for the log-likelihoods (40 read tokens/s so far; 40 of 40 generations left "
                       "(6,560 budget tokens); generations not measured yet)"]  # 1,600 tokens left at 40/s, not 20/s
    clock[0] += 5
    estimate.record(LL, [LLRequest("x" * 76, " abcdef")] * 10, 5.0)  # within every_s: nothing printed
    assert len(printed) == 1
    clock[0] += 20
    # A batch of 4 generations (each 400 characters = 100 prompt tokens, + 64 new: 164 budget tokens):
    # the first result brings the batch's 20 s, its neighbours arrive at once. Not finished until the next batch starts.
    request = GenRequest("x" * 400, ("\n",), 64)
    estimate.record(GEN, [request], 20.0)
    estimate.record(GEN, [request] * 3, 0.0)
    assert len(printed) == 1  # no generation batch known to be finished: no rate yet
    estimate.record(GEN, [request], 20.0)  # the next batch's first result: the first batch (656 budget tokens in 20 s) finished
    # left: 40 x 164 - 656 - 164 (the open batch) = 5,740 budget tokens at 32.8/s = 175 s (seconds per generation said 39 x 20 s)
    assert printed[-1] == ("estimate: about 4 min left (40 read tokens/s, 33 budget tokens/s over 1 finished generation batch so far; "
                           "35 of 40 generations left (5,740 budget tokens))")
    assert estimate.remaining_s() == (pytest.approx(1400 / 40 + 5740 * 20 / 656), [])


def test_no_time_left_is_said_before_the_generations_are_measured() -> None:
    """Log-likelihoods all done, no generation finished yet: the time left is not known, never "0 s"."""
    from evalita_eval.api import LLRequest

    printed: list[str] = []
    plans = [TaskPlan("te", LL, 2, 20, rows=2, row_tokens=18), TaskPlan("ner", GEN, 3, 30, 16)]
    estimate = TimeEstimate(plans, printed.append, clock=lambda: 0.0)
    estimate.record(LL, [LLRequest("x" * 36, " ab"), LLRequest("y" * 36, " ab")], 2.0)  # every row: 2 x 9 tokens
    assert printed == ["estimate: time left not known yet (9 read tokens/s so far; 3 of 3 generations left (78 budget tokens); "
                       "generations not measured yet)"]


def test_loglikelihoods_are_priced_by_the_rows_the_model_computes() -> None:
    """Issue 47: one-token choices of one context share a forward row (FAQ's lettered choices read their paragraph once):
    the rows left are priced, not the prompt tokens the plan counts per request (4 x 401 for one 400-token row)."""
    from evalita_eval.api import LLRequest

    count = TokenCounter(None)  # characters / 4
    letters = [LLRequest("c" * 400, f" {x}") for x in "ABCD"]  # one row of 100 + 1 - 1 tokens
    paragraphs = [LLRequest("q" * 40, " " + "p" * 79), LLRequest("q" * 40, "p" * 39 + " ")]  # rows of 10 + 20 - 1 and 10 + 10 - 1
    seen: set[str] = set()
    assert scoring_work(letters + paragraphs, count, seen) == (3, 100 + 29 + 19)
    assert scoring_work(letters[:1], count, seen) == (0, 0)  # its row is counted already
    printed: list[str] = []
    estimate = TimeEstimate([TaskPlan("faq", LL, 8, 2 * 4 * 101, rows=2, row_tokens=200)], printed.append, every_s=0, count=count)
    estimate.record(LL, letters, 1.0)  # 100 tokens in 1 s: the other paragraph's row takes 1 s, not 4
    assert estimate.remaining_s() == (pytest.approx(1.0), [])
    estimate.record(LL, [LLRequest("d" * 400, " A")], 1.0)
    estimate.record(LL, [LLRequest("d" * 400, " B")], 0.001)  # the same row, reported apart: its time joins the row's
    assert estimate.ll_calls == [(1, 100, 1.0), (1, 100, 1.001)] and estimate.ll_left == [0, 0]


def test_a_unit_streamed_at_once_is_one_measured_call() -> None:
    """Replicas report a unit's results as it arrives: the first with the seconds since the previous unit, the rest
    at once. They are one measured call: 3 units of 4 rows x 25 tokens, 2 s apart, price the rest at 50 tokens/s
    (each result alone was a call of ~0 s: 145,672,784 read tokens/s on the bench's run)."""
    from evalita_eval.api import LLRequest

    printed: list[str] = []
    estimate = TimeEstimate([TaskPlan("faq", LL, 20, 0, rows=20, row_tokens=500)], printed.append, every_s=0)
    for unit in range(3):
        rows = [LLRequest(f"{unit}{i}" + "c" * 98, " ab") for i in range(4)]  # 100 characters + 1 - 1: 25 tokens
        estimate.record(LL, rows[:1], 2.0)
        for row in rows[1:]:
            estimate.record(LL, [row], 0.0001)
    assert estimate.ll_calls == [(4, 100, pytest.approx(2.0003))] * 3
    assert estimate.remaining_s() == (pytest.approx(200 * 2.0003 / 100), [])
    assert printed[-1] == "estimate: about 4 s left (50 read tokens/s so far)"


def test_long_rows_are_priced_with_their_attention() -> None:
    """Issue 47: a row of n tokens counts n + n^2 / span (the model's ``attention_span``), so the rate of WiC's short
    rows prices FAQ's long ones higher per token, as they run. On the quickstart's model (span 1,536) a 1,300-token
    row counts 1.85 tokens per token, a 200-token row 1.13."""
    from evalita_eval.api import LLRequest

    count = TokenCounter(None, attention_span=50)  # characters / 4
    short, long = LLRequest("s" * 40, " " + "x" * 3), LLRequest("l" * 400, " " + "x" * 3)  # rows of 10 and 100 tokens
    assert scoring_work([short], count, set()) == (1, 10 + 2)
    assert scoring_work([long], count, set()) == (1, 100 + 200)
    assert scoring_work([long], TokenCounter(None), set()) == (1, 100)  # no span known (a server): tokens alone


def test_hf_backend_knows_its_attention_span(tiny_model: Path) -> None:
    from evalita_eval.backends import create_backend

    backend = create_backend("hf", BackendOptions(model=str(tiny_model), device="cpu"))
    config = backend.model.config
    span = backend.model.num_parameters(exclude_embeddings=True) // (4 * config.num_hidden_layers * config.hidden_size)
    assert backend.attention_span == span > 0


def test_a_fixed_cost_per_row_is_told_apart_from_the_cost_per_token() -> None:
    """seconds = a x rows + b x tokens, fitted by least squares once the calls' tokens per row differ by 2x or more."""
    assert fit_cost([(2, 200, 2 * 0.5 + 200 * 0.01), (8, 400, 8 * 0.5 + 400 * 0.01)]) == (pytest.approx(0.5), pytest.approx(0.01))
    assert fit_cost([(2, 200, 3.0), (4, 300, 5.0)]) == (0.0, 8.0 / 500)  # 100 and 75 tokens per row: tokens alone
    assert fit_cost([(1, 100, 2.0), (4, 100, 1.0)]) == (0.0, 3.0 / 200)  # the fit makes the row's cost negative: tokens alone
    # Short rows measured (one of 61 tokens, then 8 of 12), long rows left: at 0.5 s per row + 100 tokens/s, 10 rows of
    # 1,000 tokens take 105 s; the mean rate of the first row alone said 184 s.
    from evalita_eval.api import LLRequest

    printed: list[str] = []
    estimate = TimeEstimate([TaskPlan("faq", LL, 20, 0, rows=20, row_tokens=2 * 61 + 96 + 10_000)], printed.append, every_s=0)
    estimate.record(LL, [LLRequest("v" * 240, " abcde")], 5.0)  # the first call, with the warm-up: left out of the fit
    assert estimate.remaining_s()[0] == pytest.approx((61 + 10_096) * 5.0 / 61) and printed == []
    estimate.record(LL, [LLRequest("w" * 240, " abcde")], 0.5 + 0.01 * 61)
    assert estimate.remaining_s()[0] == pytest.approx(10_096 * 1.11 / 61)
    estimate.record(LL, [LLRequest("w" * 40 + str(i), " abcde") for i in range(8)], 8 * 0.5 + 0.01 * 8 * 12)
    assert estimate.remaining_s() == (pytest.approx(10 * 0.5 + 10_000 * 0.01), [])
    assert printed[-1] == "estimate: about 2 min left (0.50 s per row + 100 read tokens/s so far)"


def test_generation_estimate_is_batched_throughput_of_finished_batches() -> None:
    """Issue 40: 10 batches of 4 generations, 20 s each (200 s in all). After the first batch, seconds per generation
    x generations left said 36 x 20 s = 12 min; budget tokens per second of the finished batch says 180 s."""
    from evalita_eval.api import GenRequest

    printed: list[str] = []
    estimate = TimeEstimate([TaskPlan("ner", GEN, 40, 4000, 64)], printed.append, every_s=0, clock=lambda: 0.0)
    request = GenRequest("x" * 400, ("\n",), 64)  # 100 prompt tokens + 64 new = 164 budget tokens
    for batch in range(10):
        estimate.record(GEN, [request], 20.0)
        estimate.record(GEN, [request] * 3, 0.001)
        if batch == 1:  # batch 0 finished: 656 tokens in 20.001 s; left 40 x 164 - 2 x 656 = 5,248 tokens
            assert estimate.remaining_s() == (pytest.approx(5248 * 20.001 / 656), [])
    assert estimate.remaining_s() == (0.0, []) and estimate.batches == 10
    assert printed[-1] == ("estimate: about 0 s left (33 budget tokens/s over 10 finished generation batches so far; "
                           "0 of 40 generations left (0 budget tokens))")
    # Different budgets weigh what is left: a 16-token task's generations cost less than a 256-token task's.
    mixed = TimeEstimate([TaskPlan("wic", GEN, 4, 400, 16), TaskPlan("ner", GEN, 4, 400, 256)], printed.append)
    assert mixed.total_budget == 400 + 4 * 16 + 400 + 4 * 256

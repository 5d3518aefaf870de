"""Reasoning models (issue 39): --thinking on|off, the trace kept apart from the answer, the unfinished trace.

The scripted OpenAI-compatible server (tests/fake_openai_server.py) answers as a reasoning model does:
its trace in ``reasoning_content`` or inline in ``<think>`` tags, finished or cut by the budget. No word
of a trace may reach the answer rules: every trace below names both options (read whole, the reply
would be ``several``), so a credited B proves the rules read only what follows the trace.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from click.testing import CliRunner

from evalita_eval.settings import thinking as th
from evalita_eval.settings.answers import parse_letter_rule
from fake_openai_server import FakeServer
from paths import TEST_DATA

DATA = TEST_DATA / "build"
KEY_ENV = "EVALITA_TEST_THINKING_KEY"
TRACE = "La risposta potrebbe essere A o B"


# -- the split, by hand ---------------------------------------------------------------------------
@pytest.mark.parametrize(("reply", "prompt_opens", "expected"), [
    (f"<think>{TRACE}</think> B", False, th.Trace(TRACE, "B", True)),
    (f"{TRACE}</think>\nB", True, th.Trace(TRACE, "B", True)),  # the template opened the trace
    (f"<think>{TRACE}", False, th.Trace(TRACE, "", False)),
    (TRACE, True, th.Trace(TRACE, "", False)),  # opened by the prompt, never closed
    ("B", False, th.Trace(None, "B", True)),  # no trace: all answer
    ("<think></think>B", False, th.Trace("", "B", True)),  # thinking switched off by the template: an empty trace
])
def test_split_trace(reply: str, prompt_opens: bool, expected: th.Trace) -> None:
    assert th.split_trace(reply, th.DEFAULT_MARKERS, prompt_opens) == expected


# Issue 45: replies whose gold letter (B) stands only inside traces; what follows the last end marker names no option.
# (content, reasoning_content): the backend joins a server's separate trace before the content, as _chat_text does.
HOSTILE = {
    "nested": ("<think>Vediamo. <think>Ripensandoci è {g}.</think> Quindi {g}.</think>", None),
    "two_traces": ("<think>Forse A o B.</think><think>Ripensandoci è {g}.</think>", None),
    "reopened": ("<think>Forse.</think> <think>Ripensandoci è {g}", None),  # a trace opened after the last end, never closed
    "server_and_inline": ("<think>È {g}.</think>", "Ci penso"),
    "server_and_inline_end": ("È {g}.</think> Non saprei proprio.", "Ci penso"),
}


def _joined(content: str, reasoning: str | None) -> str:
    return content if reasoning is None else f"<think>{reasoning}</think>{content}"


@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_no_hostile_shape_credits_a_trace(shape: str) -> None:
    content, reasoning = HOSTILE[shape]
    reply = _joined(content.format(g="B"), reasoning)
    trace = th.split_trace(reply)
    assert "B" not in trace.answer and "B" in trace.reasoning
    assert trace.finished is (shape != "reopened")
    assert parse_letter_rule(trace.answer, ["A", "B"])[0] is None


def test_whole_reply_is_several_but_its_answer_is_b() -> None:
    reply = f"<think>{TRACE}</think> B"
    assert parse_letter_rule(reply, ["A", "B"]) == (None, "several")  # what the rules said before the split
    assert parse_letter_rule(th.split_trace(reply).answer, ["A", "B"]) == (1, "letter")


def test_other_markers_and_template_switch() -> None:
    assert th.split_trace("[THINK]A o B[/THINK]B", th.parse_markers("[THINK],[/THINK]")) == th.Trace("A o B", "B", True)
    with pytest.raises(ValueError, match="expected START,END"):
        th.parse_markers("<think>")
    for same in ("<t>,<t>", "think,/think", ["<t>", "<t>"]):  # an end read as a start would credit the trace
        with pytest.raises(ValueError, match="must differ, neither inside the other"):
            th.parse_markers(same)
    assert th.takes_thinking("{%- if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>{% endif %}")
    assert not th.takes_thinking("{{ messages }}") and not th.takes_thinking(None)


def test_generation_budgets() -> None:
    """CE's 16 tokens: alone without thinking or for the answer after a forced close; with the default trace budget otherwise."""
    from evalita_eval.running.task_kinds import task_kind
    from evalita_eval.sources.entries import all_entries

    te = next(e for e in all_entries() if e.name == "te")
    budgets = {name: task_kind(te, "ce", thinking=thinking).max_new_tokens for name, thinking in (
        ("off", th.Thinking()), ("on", th.Thinking(True)), ("forced", th.Thinking(True, max_tokens=8)))}
    assert budgets == {"off": 16, "on": 16 + 1024, "forced": 16}
    request = task_kind(te, "ce", thinking=th.Thinking(True)).gen_request("ctx", ("\n\n",), None, None)
    assert (request.stop, request.thinking) == ((), ("<think>", "</think>"))


# -- end to end: evalita-eval run against the scripted server --------------------------------------
REPLIES = [  # in turn, request after request (one request at a time: --concurrency 1)
        {"message": {"role": "assistant", "reasoning_content": TRACE, "content": "B"}, "finish_reason": "stop"},
        {"message": {"role": "assistant", "content": f"<think>{TRACE}</think> B"}, "finish_reason": "stop"},
        {"message": {"role": "assistant", "reasoning_content": TRACE, "content": None}, "finish_reason": "length"},
        {"message": {"role": "assistant", "content": f"<think>{TRACE} e poi"}, "finish_reason": "length"},
]


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    turn = itertools.count()
    fake.chat_script = lambda body: REPLIES[next(turn) % len(REPLIES)]
    yield fake
    fake.stop()


@pytest.fixture
def run_cli(tiny_model: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    from evalita_eval.cli import main

    monkeypatch.setenv(KEY_ENV, "sk-test")

    def run(*extra: str) -> Any:
        return CliRunner().invoke(main, [
            "run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "te", "--setting", "ce", "--backend", "openai-chat",
            "--backend-arg", f"base_url={server.url}", "--backend-arg", f"api_key_env={KEY_ENV}", "--backend-arg", "concurrency=1", "--backend-arg", "max_retries=0", "--no-progress", *extra])

    return run


def _samples(out: Path) -> list[dict]:
    return [json.loads(line) for p in ("p1", "p2") for line in (out / "samples" / f"te_{p}.jsonl").read_text("utf-8").splitlines()]


def test_no_word_of_a_trace_reaches_the_answer_rules(run_cli: Callable[..., Any], server: FakeServer, tmp_path: Path) -> None:
    result = run_cli("--thinking", "on", "--output-dir", str(tmp_path / "on"))
    assert result.exit_code == 0, result.output
    bodies = [b for path, _auth, b in server.seen if path.endswith("/chat/completions")]
    assert len(bodies) == 6 and all(b["chat_template_kwargs"] == {"enable_thinking": True} for b in bodies)
    assert all(b["stop"] is None for b in bodies)  # the trace's blank lines must not end it
    assert all(b["max_tokens"] == 16 + th.DEFAULT_TRACE_BUDGET for b in bodies)  # never the bare 16 tokens of CE
    samples = _samples(tmp_path / "on")
    for s in samples:
        assert s["reasoning"].startswith(TRACE) and "risposta" not in s["generation"]
        if s["reasoning_unfinished"]:
            assert (s["parsed"], s["unparsed_reason"], s["generation"]) == (None, th.UNFINISHED, "")
        else:
            assert (s["parsed"], s["parsed_by"], s["generation"]) == (1, "letter", "B")  # not "several"
    assert sum(s["reasoning_unfinished"] for s in samples) == 2  # replies 3 and 4 of the six (1 2 3 4 1 2)
    doc = json.loads((tmp_path / "on" / "results.json").read_text("utf-8"))
    assert doc["config"]["thinking"] is True and doc["config"]["trace_budget"] == th.DEFAULT_TRACE_BUDGET == 1024
    assert doc["run_identity"]["thinking"]["on"] is True and doc["run_identity"]["thinking"]["trace_budget"] == 1024
    assert "thinking: each trace may take 1,024 tokens on top of the answer's (the default)" in result.output
    # What was asked is what was sent: no stop string, the answer's budget plus the trace's.
    assert doc["asked"]["te"] == {"request": "generate_until", "max_new_tokens": 16 + th.DEFAULT_TRACE_BUDGET, "until": []}
    per_prompt = {p: sum(s["reasoning_unfinished"] for s in samples[i * 3:(i + 1) * 3]) for i, p in enumerate(("p1", "p2"))}
    for prompt, n in per_prompt.items():
        assert doc["reasoning"]["te"][prompt]["unfinished"] == n
        assert doc["parsed_by"]["te"][prompt].get(f"unparsed: {th.UNFINISHED}", 0) == n
        assert doc["results"]["te"][prompt]["unparsed"] == n


def test_thinking_on_and_off_are_two_runs_in_two_folders(run_cli: Callable[..., Any], server: FakeServer, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_cli("--thinking", "off").exit_code == 0
    off = [b for _p, _a, b in server.seen]
    assert run_cli("--thinking", "on").exit_code == 0
    folders = sorted(p.name for p in (tmp_path / "results").glob("*/*"))
    assert len(folders) == 2 and folders[0].startswith("ce-") and folders[1].startswith("ce-thinking-")
    assert all(b["chat_template_kwargs"] == {"enable_thinking": False} and b["stop"] == ["\n\n"] for b in off)
    # Off: the server's separate trace is not asked for and dropped; an inline one is still kept apart.
    samples = _samples(next((tmp_path / "results").glob("*/ce-[0-9a-f]*")))
    assert sorted(s["generation"] for s in samples) == ["", "", "B", "B", "B", "B"]
    assert sum((s.get("reasoning") or "").startswith(TRACE) for s in samples) == 3 and sum(s.get("reasoning_unfinished", False) for s in samples) == 1


def test_loglikelihood_with_thinking_on_exits_1_with_one_line(tiny_model: Path, tmp_path: Path) -> None:
    from evalita_eval.cli import main

    result = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "te", "--limit", "1",
                                       "--thinking", "on", "--think-markers", "<think>,</think>",  # (else: no trace markers)
                                       "--output-dir", str(tmp_path / "ll"), "--no-progress"])
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert errors == ["Error: --thinking on: te is scored by log-likelihood, where a model writes no trace; ask it in a generated "
                      "setting (--setting ce, ce-ni or oe) or run with --thinking off"]
    assert not (tmp_path / "ll" / "results.json").exists()


@pytest.mark.parametrize(("extra", "message"), [
    (("--max-thinking-tokens", "8"), "--max-thinking-tokens bounds a trace: it needs --thinking on"),
    (("--thinking", "on", "--constrained"), "--constrained with --thinking on needs --max-thinking-tokens N"),
    (("--thinking", "on", "--think-markers", "<think>"), "expected START,END"),
    (("--thinking", "on", "--think-markers", "<t>,<t>"), "--think-markers <t>,<t>: the start and end markers must differ"),
])
def test_thinking_options_that_cannot_go_together(tiny_model: Path, tmp_path: Path, extra: tuple[str, ...], message: str) -> None:
    from evalita_eval.cli import main

    result = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "te", "--setting", "ce",
                                       "--output-dir", str(tmp_path / "x"), "--no-progress", *extra])
    assert result.exit_code == 2 and message in result.output
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("shape", sorted(HOSTILE))
def test_wic_with_the_gold_letter_only_in_traces_scores_zero(shape: str, tiny_model: Path, server: FakeServer, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 45: every hostile shape through the CLI: no answer read, WiC CE accuracy 0 (the trace's letter is the gold)."""
    from evalita_eval.cli import main

    monkeypatch.setenv(KEY_ENV, "sk-test")
    content, reasoning = HOSTILE[shape]

    def reply(body: dict) -> dict:
        gold = "B" if "'parte'" in body["messages"][-1]["content"] else "A"  # wic3 means the same (B: Sì); wic1, wic2 not
        message = {"role": "assistant", "content": content.format(g=gold),
                   **({"reasoning_content": reasoning} if reasoning is not None else {})}
        return {"message": message, "finish_reason": "length" if shape == "reopened" else "stop"}

    server.chat_script = reply
    out = tmp_path / "wic"
    result = CliRunner().invoke(main, [
        "run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "wic", "--setting", "ce", "--backend", "openai-chat",
        "--backend-arg", f"base_url={server.url}", "--backend-arg", f"api_key_env={KEY_ENV}", "--backend-arg", "concurrency=1", "--backend-arg", "max_retries=0", "--no-progress",
        "--thinking", "on", "--output-dir", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text("utf-8"))
    assert {p: (r["acc"], r["unparsed"]) for p, r in doc["results"]["wic"].items()} == {"p1": (0.0, 3), "p2": (0.0, 3)}
    samples = [json.loads(line) for p in ("p1", "p2") for line in (out / "samples" / f"wic_{p}.jsonl").read_text("utf-8").splitlines()]
    assert len(samples) == 6 and all(s["parsed"] is None and s["parsed_by"] is None for s in samples)
    assert all(s["generation"] in ("", "Non saprei proprio.") for s in samples)
    assert all(s["reasoning_unfinished"] is (shape == "reopened") for s in samples)


def test_markers_that_differ_are_checked_in_a_config_file_too(tiny_model: Path, tmp_path: Path) -> None:
    from evalita_eval.cli import main

    config = tmp_path / "run.yaml"
    config.write_text("think_markers: ['<t>', '<t>']\n", "utf-8")
    result = CliRunner().invoke(main, ["run", "--config", str(config), "--model", str(tiny_model), "--data", str(DATA), "--tasks", "te",
                                       "--setting", "ce", "--thinking", "on", "--output-dir", str(tmp_path / "x"), "--no-progress"])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert str(config) in result.output and "think_markers" in result.output and "must differ" in result.output
    assert not (tmp_path / "x").exists()


# -- budget forcing on hf, with a tiny model whose chat template has the enable_thinking switch ----------
# As Qwen3's: switched on, the generation prompt opens the trace; off, it writes an empty one.
THINKING_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% if enable_thinking is defined and enable_thinking is false %}"
    "<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}{% endif %}"
)


@pytest.fixture(scope="module")
def thinking_model(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    import shutil

    out = tmp_path_factory.mktemp("thinking-model") / "model"
    shutil.copytree(tiny_model, out)
    config = json.loads((out / "tokenizer_config.json").read_text("utf-8"))
    config["chat_template"] = THINKING_TEMPLATE
    (out / "tokenizer_config.json").write_text(json.dumps(config), "utf-8")
    (out / "chat_template.jinja").unlink(missing_ok=True)
    return out


def _hf_run(model: Path, out: Path, *extra: str) -> Any:
    from evalita_eval.cli import main

    return CliRunner().invoke(main, ["run", "--model", str(model), "--data", str(DATA), "--tasks", "te", "--setting", "ce", "--limit", "2",
                                     "--apply-chat-template", "--device", "cpu", "--output-dir", str(out), "--no-progress", *extra])


def test_budget_forcing_closes_the_trace_and_reads_the_answer_after_it(thinking_model: Path, tmp_path: Path) -> None:
    """The random model never writes </think>: at 8 tokens its trace is closed, and the answer is generated
    after the close with CE's own 16 tokens, constrained to a letter: every answer is read."""
    result = _hf_run(thinking_model, tmp_path / "forced", "--thinking", "on", "--max-thinking-tokens", "8", "--constrained")
    assert result.exit_code == 0, result.output
    samples = _samples(tmp_path / "forced")
    assert len(samples) == 4
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(thinking_model)
    for s in samples:
        assert s["prompt"].endswith("<|assistant|>\n<think>\n")  # enable_thinking=True: the template opened the trace
        assert s["reasoning_forced"] is True and s["reasoning_unfinished"] is False
        # 8 generated tokens; counted again on the trace's text (stripped), as for a trace read from a server
        assert s["reasoning"] and s["reasoning_tokens"] == len(tokenizer.encode(s["reasoning"], add_special_tokens=False))
        assert s["generation"] in ("A", "B") and s["parsed_by"] == "letter"  # the answer after the close, read
    cache = [json.loads(line) for line in (tmp_path / "forced" / "cache.jsonl").read_text("utf-8").splitlines()]
    assert len(cache) == 8  # per document and prompt: the trace, then the answer
    doc = json.loads((tmp_path / "forced" / "results.json").read_text("utf-8"))
    assert doc["config"]["max_thinking_tokens"] == 8 and doc["config"]["trace_budget"] == 8
    assert {p: r["forced"] for p, r in doc["reasoning"]["te"].items()} == {"p1": 2, "p2": 2}
    assert doc["asked"]["te"]["until"] == ["\n\n"] and doc["asked"]["te"]["max_new_tokens"] == 16  # the forced answer's request
    assert doc["run_identity"]["thinking"] == {"on": True, "think_markers": ["<think>", "</think>"], "max_thinking_tokens": 8,
                                               "trace_budget": 8}
    plan_row = next(line.split() for line in result.output.splitlines() if line.startswith("te "))
    assert plan_row[:3] == ["te", "generate", "8"]  # the plan counts what forcing sends: 2 items x 2 prompts x 2
    assert "thinking: each trace closed at 8 tokens (--max-thinking-tokens), then the answer generated after it" in result.output


def test_thinking_off_sets_the_switch_and_a_template_without_one_is_named(thinking_model: Path, tiny_model: Path, tmp_path: Path) -> None:
    off = _hf_run(thinking_model, tmp_path / "off", "--max-new-tokens", "2")
    assert off.exit_code == 0, off.output
    assert "enable_thinking" not in off.output
    assert all(s["prompt"].endswith("<think>\n\n</think>\n\n") for s in _samples(tmp_path / "off"))  # switched off
    # No switch and no <think> token in the tiny tokenizer: refused (test below) unless the markers are given.
    plain = _hf_run(tiny_model, tmp_path / "plain", "--thinking", "on", "--max-thinking-tokens", "2", "--max-new-tokens", "2",
                    "--think-markers", "<think>,</think>")
    assert plain.exit_code == 0, plain.output
    notes = [line for line in plain.output.splitlines() if "enable_thinking" in line]
    assert notes == ["note: the chat template takes no enable_thinking switch: the prompts are rendered as without --thinking on "
                     "(a model that always thinks still has its trace kept apart)"]
    assert _hf_run(tiny_model, tmp_path / "plain-off", "--max-new-tokens", "2").output.count("enable_thinking") == 0


def test_thinking_on_a_model_that_cannot_think_is_refused_before_any_work(tiny_model: Path, tmp_path: Path) -> None:
    """Issue 47: a chat template without enable_thinking and a tokenizer without <think> tokens (as SmolLM2's): the real
    CLI exits 1 with one line, before the output folder, the plan or any request."""
    import subprocess
    import sys

    out = tmp_path / "refused"
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(tiny_model), "--data", str(DATA),
                           "--tasks", "te", "--setting", "ce", "--limit", "2", "--apply-chat-template", "--device", "cpu",
                           "--thinking", "on", "--output-dir", str(out), "--no-progress"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert [line for line in (proc.stdout + proc.stderr).splitlines() if "Error" in line] == [
        "Error: --thinking on: the model's chat template has no enable_thinking switch and its tokenizer no <think>/</think> "
        "tokens: it is neither asked to think nor known to write a trace; run with --thinking off, or give --think-markers "
        "START,END if it writes one"]
    assert "writing to" not in proc.stderr and "prompt tokens" not in proc.stderr and not out.exists()


def test_report_and_compare_of_thinking_on_and_off(run_cli: Callable[..., Any], tmp_path: Path) -> None:
    """The report shows each prompt's traces beside the unparsed reasons; compare pairs on and off by document."""
    from evalita_eval.cli import main

    assert run_cli("--thinking", "off", "--output-dir", str(tmp_path / "off")).exit_code == 0
    assert run_cli("--thinking", "on", "--output-dir", str(tmp_path / "on")).exit_code == 0
    compared = CliRunner().invoke(main, ["compare", str(tmp_path / "on"), str(tmp_path / "off"), "--bootstrap", "10"])
    assert compared.exit_code == 0, compared.output
    assert "the runs differ in thinking (A on, B off): the same prompts and items, paired by document" in compared.output
    assert "differ in setting" not in compared.output
    report = CliRunner().invoke(main, ["report", str(tmp_path / "on"), str(tmp_path / "off"), "--out", str(tmp_path / "report"),
                                       "--bootstrap", "0", "--no-progress"])
    assert report.exit_code == 0, report.output
    text = (tmp_path / "report" / "report.md").read_text("utf-8")
    doc = json.loads((tmp_path / "on" / "results.json").read_text("utf-8"))["reasoning"]["te"]
    samples = _samples(tmp_path / "on")
    for i, p in enumerate(("p1", "p2")):  # the backend's tokenizer (the local model's) counts the traces
        counts = [s["reasoning_tokens"] for s in samples[i * 3:(i + 1) * 3]]
        assert doc[p]["mean_trace_tokens"] == round(sum(counts) / 3, 1) and doc[p]["traces"] == 3
    cell = "; ".join(f"{p}: mean {doc[p]['mean_trace_tokens']} tokens, forced 0, unfinished {doc[p]['unfinished']}" for p in ("p1", "p2"))
    assert "traces (--thinking on)" in text and cell in text
    assert "ce thinking" in text


def test_a_generative_task_scores_the_answer_after_the_trace(tiny_model: Path, server: FakeServer, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """SUM with thinking on: the summary scored is what follows the trace (ROUGE of the trace's words: none)."""
    from evalita_eval.cli import main

    monkeypatch.setenv(KEY_ENV, "sk-test")
    server.chat_script = lambda body: {"message": {"role": "assistant", "reasoning_content": "Riassumo: il testo parla di",
                                                   "content": "Il testo."}, "finish_reason": "stop"}
    result = CliRunner().invoke(main, [
        "run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "sum", "--limit", "2", "--backend", "openai-chat",
        "--backend-arg", f"base_url={server.url}", "--backend-arg", f"api_key_env={KEY_ENV}", "--backend-arg", "concurrency=1", "--backend-arg", "max_retries=0", "--no-progress",
        "--thinking", "on", "--output-dir", str(tmp_path / "sum")])
    assert result.exit_code == 0, result.output
    samples = [json.loads(line) for f in sorted((tmp_path / "sum" / "samples").glob("*.jsonl")) for line in f.read_text("utf-8").splitlines()]
    assert samples and all(s["generation"] == s["prediction"] == "Il testo." for s in samples)
    assert all(s["reasoning"] == "Riassumo: il testo parla di" and not s["reasoning_unfinished"] for s in samples)

"""The closed-ended study's text metrics in OE and CE-NI (issue 39): corpus BLEU (sacrebleu) beside ROUGE-L,
and BERTScore F1 only with --bertscore-model (absent, not zero, without it)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import sacrebleu
from click.testing import CliRunner

from evalita_eval.metrics import BERTSCORE_F1, BLEU_ANSWER, corpus_bleu, metric_of
from fake_openai_server import FakeServer
from paths import TEST_DATA

DATA = TEST_DATA / "build"
KEY_ENV = "EVALITA_TEST_METRICS_KEY"


def test_bleu_hand_checked() -> None:
    # Every n-gram of the answer is in the reference (precisions 5/5, 4/4, 3/3, 2/2); the answer is 5 tokens
    # of the reference's 6: the brevity penalty exp(1 - 6/5).
    pair = ("il gatto è sul tappeto", "il gatto è sul tappeto rosso")
    assert corpus_bleu([pair]) == pytest.approx(math.exp(1 - 6 / 5))
    # Corpus statistics add up over the pairs: 8/8, 6/6, 4/4, 2/2, lengths equal: 1.
    assert corpus_bleu([("il gatto è sul tappeto", "il gatto è sul tappeto"), ("il cane dorme", "il cane dorme")]) == pytest.approx(1.0)
    assert corpus_bleu([("ciao", "il gatto")]) == 0.0
    pairs = [("Sì, direi di sì", "Sì"), ("non hanno lo stesso significato", "hanno lo stesso significato")]
    assert corpus_bleu(pairs) == sacrebleu.corpus_bleu([a for a, _ in pairs], [[r for _, r in pairs]]).score / 100
    assert (BLEU_ANSWER.kind, BLEU_ANSWER.higher_is_better, metric_of(None, "bleu_answer")) == ("corpus", True, BLEU_ANSWER)
    assert (BERTSCORE_F1.kind, BERTSCORE_F1.higher_is_better) == ("corpus", True)


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A seeded random 2-layer BERT with a word-piece vocabulary of the words below, saved locally."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    out = tmp_path_factory.mktemp("tiny-bert")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Sì", "No", "sì", "no", "direi", "di", "forse", ",", "."]
    BertTokenizer(vocab={w: i for i, w in enumerate(words)}, do_lower_case=False, strip_accents=False, model_max_length=64).save_pretrained(out)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(words), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64)
    BertModel(config).save_pretrained(out)
    return out


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    turn = itertools.count()
    replies = ["Sì", "No", "direi di sì", "forse"]  # the model's answers in turn (one request at a time)
    fake.chat_script = lambda body: {"message": {"role": "assistant", "content": replies[next(turn) % 4]}, "finish_reason": "stop"}
    yield fake
    fake.stop()


@pytest.fixture
def run_oe(tiny_model: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    from evalita_eval.cli import main

    monkeypatch.setenv(KEY_ENV, "sk-test")

    def run(out: Path, *extra: str) -> Any:
        return CliRunner().invoke(main, [
            "run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "te", "--setting", "oe", "--backend", "openai-chat",
            "--backend-arg", f"base_url={server.url}", "--backend-arg", f"api_key_env={KEY_ENV}", "--backend-arg", "concurrency=1", "--backend-arg", "max_retries=0", "--no-progress",
            "--output-dir", str(out), *extra])

    return run


def _samples(out: Path, prompt: str) -> list[dict]:
    return [json.loads(line) for line in (out / "samples" / f"te_{prompt}.jsonl").read_text("utf-8").splitlines()]


def test_bleu_in_a_run_equals_sacrebleu_and_bertscore_is_absent_without_a_model(run_oe: Callable[..., Any], tmp_path: Path) -> None:
    result = run_oe(tmp_path / "oe")
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "oe" / "results.json").read_text("utf-8"))
    for prompt in ("p1", "p2"):
        samples = _samples(tmp_path / "oe", prompt)
        expected = sacrebleu.corpus_bleu([s["generation"] for s in samples], [[s["gold_answer"] for s in samples]]).score / 100
        assert doc["results"]["te"][prompt]["bleu_answer"] == expected
        assert "bertscore_f1" not in doc["results"]["te"][prompt] and all("bertscore_f1" not in s for s in samples)
    assert "bertscore" not in doc["config"]


def test_bertscore_with_a_tiny_local_model(run_oe: Callable[..., Any], tiny_bert: Path, tmp_path: Path) -> None:
    pytest.importorskip("bert_score")
    result = run_oe(tmp_path / "bs", "--bertscore-model", str(tiny_bert))
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "bs" / "results.json").read_text("utf-8"))
    assert doc["config"]["bertscore"]["name_or_path"] == str(tiny_bert) and doc["config"]["bertscore"]["files_sha256"]
    assert doc["config"]["bertscore"]["library"].startswith("bert-score ")
    assert doc["run_identity"]["bertscore_model"] == str(tiny_bert)
    equal = 0
    for prompt in ("p1", "p2"):
        samples = _samples(tmp_path / "bs", prompt)
        for s in samples:  # an answer equal to its gold text scores 1 (each token matched to itself); another less
            same = s["generation"] == s["gold_answer"]
            assert s["bertscore_f1"] == pytest.approx(1.0, abs=1e-5) if same else s["bertscore_f1"] < 0.999
        equal += sum(s["generation"] == s["gold_answer"] for s in samples)
        mean = sum(s["bertscore_f1"] for s in samples) / len(samples)
        assert doc["results"]["te"][prompt]["bertscore_f1"] == pytest.approx(mean)
    assert equal == 1  # the script's "Sì" met the gold "Sì" once: both cases are checked

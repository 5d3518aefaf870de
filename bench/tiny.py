"""The benchmarks' random-weight model: ``tests/tiny_model.py`` with a tokenizer trained on the raw files.

Training the BPE tokenizer on real Italian sources (the committed FAQ and SENTIPOLC
files) gives realistic token counts per request, which is what the timings depend on.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from tiny_model import build_tiny_model as _build  # noqa: E402  (the tests' builder)


def italian_lines(limit: int = 20000) -> Iterator[str]:
    """Italian sentences from the committed raw FAQ and SENTIPOLC files."""
    n = 0
    with open(REPO / "raw/faq/faqs_uft8_QA.csv", encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh, delimiter=";"):
            for text in (row["question"], row["answer"]):
                yield text
                n += 1
    with open(REPO / "raw/sa/sentipolc16_officialdistrib_train.csv", encoding="utf-8", newline="") as fh:
        for row in csv.reader(fh):
            if n >= limit:
                return
            yield row[-1]
            n += 1


def build_tiny_model(out_dir: str | Path, layers: int = 2, hidden: int = 64, seed: int = 0, vocab_size: int = 4096, corpus_lines: int = 20000) -> Path:
    """A Llama-shaped checkpoint (grouped-query attention) with seeded random weights."""
    heads = max(2, hidden // 32)
    return _build(out_dir, layers=layers, hidden=hidden, seed=seed, vocab_size=vocab_size,
                  corpus=italian_lines(corpus_lines), heads=heads, kv_heads=max(1, heads // 2))


def load(model_dir: str | Path, dtype=None, device: str = "cpu"):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype or torch.float32).to(device).eval()
    return model, AutoTokenizer.from_pretrained(model_dir)

"""A tiny Llama-shaped model with seeded random weights and a BPE tokenizer trained on Italian text.

No download: the tokenizer is trained with ``tokenizers`` on the committed raw Italian
sources, the weights are drawn from a seeded generator. Both are saved to a folder and
loaded back through ``from_pretrained``, as a real checkpoint would be.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parent.parent
SPECIAL = ["<s>", "</s>", "<pad>"]


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


def build_tokenizer(out_dir: Path, vocab_size: int = 4096, corpus_lines: int = 20000):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(italian_lines(corpus_lines), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.save_pretrained(out_dir)
    return fast


def build_tiny_model(
    out_dir: str | Path, layers: int = 2, hidden: int = 64, seed: int = 0, heads: int | None = None, vocab_size: int = 4096, corpus_lines: int = 20000
) -> Path:
    """Write a Llama-shaped checkpoint with random weights (seeded) and its tokenizer to ``out_dir``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(out, vocab_size, corpus_lines)
    heads = heads or max(2, hidden // 32)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=hidden * 8 // 3,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),  # grouped-query attention, as in Llama 3
        max_position_embeddings=2048,
        # Larger than the usual 0.02 so that the random model has peaked, tie-free distributions.
        initializer_range=0.1,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    # Scoped RNG: the seed decides the weights without touching global random state.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.save_pretrained(out)
    return out


def load(model_dir: str | Path, dtype=None, device: str = "cpu"):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype or torch.float32).to(device).eval()
    return model, AutoTokenizer.from_pretrained(model_dir)

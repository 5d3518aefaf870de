"""A tiny Llama-shaped model with random weights, for tests and benchmarks (no download).

``build_tiny_model(dir)`` trains a byte-level BPE tokenizer on Italian text with
``tokenizers`` and saves it with a seeded random ``LlamaForCausalLM``, so that
both load through ``from_pretrained(dir)``. Like Llama's, the tokenizer adds a BOS
token when asked for special tokens, which exercises lm-eval's conventions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

# Italian text for the tokenizer; the registry's prompt templates are added to it.
_ITALIAN = [
    "La frase implica logicamente che la seconda frase sia vera? Sì, no, forse.",
    "Il governo ha approvato ieri la nuova legge sul lavoro, tra le proteste dei sindacati.",
    "A Roma e a Milano piove da tre giorni; la Protezione civile ha diramato l'allerta meteo.",
    "Giuseppe Verdi nacque a Busseto nel 1813 e morì a Milano nel 1901.",
    "Il paziente presenta una pressione arteriosa di 140/90 mmHg e una glicemia di 110 mg/dl.",
    "Che bella giornata! Oggi andiamo al mare con gli amici, finalmente un po' di sole.",
    "Questo film è davvero pessimo: la trama è noiosa e gli attori recitano male.",
    "L'azienda sanitaria locale ha comunicato i risultati degli esami del sangue.",
    "Qual è la capitale d'Italia? Rispondi con una sola parola. Risposta: Roma.",
    "Per pagare la bolletta dell'acqua si può usare il bollettino postale o il bonifico.",
    "Il contatore dell'acqua deve essere letto ogni sei mesi dal personale autorizzato.",
    "Gli immigrati sono una risorsa, ma alcuni tweet esprimono odio e stereotipi.",
    "La parola 'banca' nella frase 'sono andato in banca' ha un significato diverso.",
    "Il medico ha prescritto una terapia antibiotica per dieci giorni.",
    "Elenca i sinonimi: casa, abitazione, dimora, alloggio, residenza, edificio.",
    "Riassumi il seguente articolo di giornale in poche righe, senza commenti.",
    "àèéìòù ÀÈÉÌÒÙ perché così già più può città università caffè",
    "0123456789 + - * / = % $ & # @ ! ? , . ; : ' \" ( ) [ ] { } < > \n",
]


def _corpus() -> list[str]:
    from evalita_data.registry import TASKS

    texts = list(_ITALIAN)
    for spec in TASKS.values():
        for p in spec.prompts:
            texts.append(p.template)
            if isinstance(getattr(p, "choices", None), list):
                texts.extend(p.choices)
    return texts * 3


CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}"
    "{% if m['role'] == 'assistant' %}{{ eos_token }}{% endif %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def _train_tokenizer(out: Path, vocab_size: int, max_positions: int, corpus: Iterable[str] | None):
    """A byte-level BPE tokenizer trained on ``corpus`` (else the built-in sentences), saved under ``out``
    with the chat template; returns the trained ``tokenizers.Tokenizer``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<s>", "</s>", "<pad>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus() if corpus is None else corpus, trainer=trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>", model_max_length=max_positions
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return tok


def build_tiny_model(
    dir: str | Path,
    layers: int = 2,
    hidden: int = 64,
    seed: int = 0,
    vocab_size: int = 1000,
    max_positions: int = 2048,
    corpus: Iterable[str] | None = None,
    heads: int = 4,
    kv_heads: int | None = None,
) -> Path:
    """Save a seeded random Llama model and its trained tokenizer under ``dir``; returns ``dir``.

    ``corpus`` replaces the built-in Italian sentences for the tokenizer (the benchmarks
    train on the raw files for realistic token counts); ``kv_heads`` < ``heads`` gives
    grouped-query attention as in Llama 3.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out = Path(dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = _train_tokenizer(out, vocab_size, max_positions, corpus)
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads or heads,
        max_position_embeddings=max_positions,
        bos_token_id=tok.token_to_id("<s>"),
        eos_token_id=tok.token_to_id("</s>"),
        pad_token_id=tok.token_to_id("<pad>"),
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    # Every matrix is redrawn from a seeded generator (not the global RNG), with a larger
    # scale than the default so that the random model's preferences are not near-ties.
    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed)
        for p in model.parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)
    model.save_pretrained(out, safe_serialization=True)
    return out

"""BERTScore F1 of the answers of OE and CE-NI (``--bertscore-model PATH_OR_ID``): each sample's ``bertscore_f1`` (the
answer after any trace, against the gold answer text); docs/settings.md (the study's text metrics).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

from ..backend_support.identity import model_source_identity


def bertscore_record(model: str) -> dict[str, Any]:
    """What results.json says of the scorer: the model, its files' fingerprint or Hub commit, the library's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        library = version("bert-score")
    except PackageNotFoundError:
        library = None
    return {**model_source_identity(model, None), "library": f"bert-score {library}" if library else None}


@lru_cache(maxsize=2)
def _scorer(model: str) -> Any:
    try:
        from bert_score import BERTScorer
    except ImportError:
        raise ValueError("--bertscore-model needs the bert-score package: pip install -e '.[bertscore]' (in a clone of "
                         "evalita-llm)") from None
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model)  # the last layer: bert-score's table knows only its own models
    scorer = BERTScorer(model_type=model, num_layers=config.num_hidden_layers, batch_size=16, device="cpu")
    # A tokenizer that declares no length (transformers' huge placeholder) overflows bert-score's truncation.
    scorer._tokenizer.model_max_length = min(scorer._tokenizer.model_max_length,
                                             getattr(config, "max_position_embeddings", 512))
    return scorer


def bertscore_f1(model: str, answers: Sequence[str], references: Sequence[str]) -> list[float]:
    """Each answer's BERTScore F1 against its reference (an empty answer: 0.0, as bert-score warns and scores it)."""
    if not answers:
        return []
    _p, _r, f1 = _scorer(model).score(list(answers), list(references))
    return [round(float(x), 6) for x in f1]

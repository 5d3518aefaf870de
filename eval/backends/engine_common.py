"""What the engine backends (vLLM, OpenAI-compatible servers) share with the HF path: its rules, stated once for
engines that take token ids. No heavy imports here: the registry imports every module of this package."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..api import GenRequest, LLRequest, prompt_room, scoring_input
from ..backend_support.gguf import GGUFModel, pretrained_source
from ..backend_support.tokenization import default_add_special_tokens, encode_request

DEFAULT_MAX_LENGTH = 2048  # lm-eval's default when neither config nor tokenizer says
_TOKENIZER_INFINITY = 1000000000000000019884624838656


def resolve_max_length(config: Any, tokenizer: Any) -> int:
    """lm-eval's ``resolve_max_length``: config n_positions/max_position_embeddings/n_ctx, else tokenizer."""
    cfg = getattr(config, "text_config", None) or config
    for attr in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(cfg, attr, None)
        if value is not None:
            return int(value)
    mml = getattr(tokenizer, "model_max_length", None)
    if mml is not None and mml != _TOKENIZER_INFINITY:
        return int(mml)
    return DEFAULT_MAX_LENGTH


@dataclass(frozen=True)
class LLWindow:
    """One request as token ids: the model reads ``ids[:-1]`` and the last ``n_cont`` of ``ids`` are scored."""

    ids: tuple[int, ...]
    n_cont: int

    @property
    def context(self) -> tuple[int, ...]:
        """What the model reads before the first continuation token."""
        return self.ids[: len(self.ids) - self.n_cont]


def ll_windows(tokenizer: Any, requests: Sequence[LLRequest], max_length: int) -> list[LLWindow]:
    """Each request's tokens exactly as the HF path computes them (``encode_request``, ``scoring_input``: what the
    model reads, then the last continuation token), with the same errors for unscorable requests."""
    out = []
    for req in requests:
        ctx, cont = encode_request(tokenizer, req)
        out.append(LLWindow(tuple(scoring_input(ctx, cont, max_length, req.continuation)) + (cont[-1],), len(cont)))
    return out


def stop_strings(tokenizer: Any, stop: Sequence[str]) -> list[str]:
    """lm-eval's ``until``: the request's stop strings, then the EOS string."""
    eos = tokenizer.decode([tokenizer.eos_token_id], skip_special_tokens=False)
    return list(stop) + ([eos] if eos not in stop else [])


def generation_prompt(tokenizer: Any, req: GenRequest, max_length: int) -> list[int]:
    """The prompt ids of a generation request, left-truncated to leave room for ``max_new_tokens``."""
    max_ctx = prompt_room(max_length, req.max_new_tokens)
    ids = tokenizer.encode(req.context, add_special_tokens=default_add_special_tokens(tokenizer, req.context))
    return ids[-max_ctx:]


def model_max_length(model: str, tokenizer: Any, revision: str | None, trust_remote_code: bool,
                     gguf: GGUFModel | None = None) -> int:
    """lm-eval's rule (config, else tokenizer, else 2048), as the HF backend resolves it."""
    from transformers import AutoConfig

    source, files = pretrained_source(model, gguf)
    try:
        config = AutoConfig.from_pretrained(source, revision=revision, trust_remote_code=trust_remote_code, **files)
    except (OSError, ValueError):
        config = None  # a tokenizer-only folder (an API model): the tokenizer's limit
    return resolve_max_length(config, tokenizer)


def load_tokenizer(model: str, revision: str | None, trust_remote_code: bool, gguf: GGUFModel | None = None) -> Any:
    """The model's tokenizer; a GGUF model's is built from the file's metadata (its name the file's, not the folder's,
    which the cache identity would otherwise fingerprint as a tokenizer folder)."""
    from transformers import AutoTokenizer

    source, files = pretrained_source(model, gguf)
    tokenizer = AutoTokenizer.from_pretrained(source, revision=revision, trust_remote_code=trust_remote_code, **files)
    if gguf is not None:
        tokenizer.name_or_path = gguf.location
    return tokenizer

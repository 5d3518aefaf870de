"""Loading a transformers model and tokenizer as lm-eval's ``HFLM`` sets them up."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..api import BackendOptions
from .engine_common import load_tokenizer, resolve_max_length


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    max_length: int
    name_or_path: str


def _torch_dtype(dtype: str) -> Any:
    import torch

    if dtype == "auto":
        return "auto"
    try:
        return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; use auto, float32, float16 or bfloat16") from None


def load_hf(options: BackendOptions) -> LoadedModel:
    """Tokenizer and ``AutoModelForCausalLM`` as lm-eval's HFLM sets them up; loads nothing remote unless
    ``options.model`` is a Hub id. ``device="auto"``: accelerate's ``device_map="auto"`` over every visible GPU (and the
    CPU); ``threads``: torch's intra-op threads; a GGUF file is dequantized by transformers (docs/evaluator.md)."""
    import torch
    from transformers import AutoModelForCausalLM

    from ..backend_support.gguf import gguf_model, pretrained_source, require_gguf

    if options.threads is not None:
        torch.set_num_threads(options.threads)
    device = options.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for but torch sees no CUDA device")
    # The typed options (HFOptions.gguf_file); a direct call with options not resolved yet: the --backend-arg as given.
    gguf = gguf_model(options.model, asdict(options.engine) if options.engine is not None else options.extra)
    if gguf is not None:
        require_gguf(options.model)
    source, files = pretrained_source(options.model, gguf)
    placement: dict[str, Any] = {}
    if device == "auto":
        import importlib.util

        if importlib.util.find_spec("accelerate") is None:
            raise RuntimeError("--device auto needs accelerate: pip install accelerate")
        placement["device_map"] = "auto"
    tokenizer = load_tokenizer(options.model, options.revision, options.trust_remote_code, gguf)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=_torch_dtype(options.dtype), revision=options.revision,
                                                 trust_remote_code=options.trust_remote_code, **files, **placement)
    if not placement:
        model = model.to(device)
    model.eval()
    if tokenizer.pad_token_id is None:  # lm-eval's configure_pad_token: pad with unk, else eos
        tokenizer.pad_token_id = tokenizer.unk_token_id if tokenizer.unk_token is not None else tokenizer.eos_token_id
    max_length = options.max_length or resolve_max_length(model.config, tokenizer)
    return LoadedModel(model, tokenizer, max_length, options.model)

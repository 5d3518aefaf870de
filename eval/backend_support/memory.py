"""Memory budgets of one forward pass (``--batch-size auto``, ``--max-memory``; the formula of ``forward_bytes``:
docs/evaluator.md#memory, an upper estimate for inference) and the peak memory a run records in results.json."""

from __future__ import annotations

import re
import sys
from typing import Any

# The budget on CPU when --max-memory is not given (a laptop runs other things too).
DEFAULT_CPU_BUDGET = 1 << 30
# Padded tokens (rows x longest row) of one scoring forward pass on CPU at most (docs/evaluator.md#memory): a pass's
# activations grow with its tokens (SmolLM2-135M, float32: about 25 KB per token in the MLP), and on CPU a wider pass
# is not faster.
CPU_PASS_TOKENS = 2048
# On CUDA without --max-memory: this share of the memory free once the model is loaded.
CUDA_FREE_SHARE = 0.8

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40, "t": 1000**4, "tb": 1000**4}


def parse_memory(text: str) -> int:
    """Bytes of a size such as ``4GiB``, ``512MiB``, ``2GB`` or ``1000000`` (bytes)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise ValueError(f"memory size {text!r}: expected a number with an optional unit (B, KiB, MiB, GiB, TiB, KB, "
                         "MB, GB, TB), e.g. 4GiB")
    value = int(float(match.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"memory size {text!r} must be more than 0 bytes")
    return value


def _text_config(config: Any) -> Any:
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def forward_bytes(config: Any, itemsize: int, rows: int, width: int, scored: int) -> int:
    """Working memory of one pass of ``rows`` x ``width`` tokens, ``scored`` of them projected onto the vocabulary."""
    cfg = _text_config(config)
    intermediate = getattr(cfg, "intermediate_size", None) or 4 * cfg.hidden_size
    per_token = itemsize * (6 * cfg.hidden_size + 3 * intermediate + (cfg.num_attention_heads + 1) * width)
    return rows * width * per_token + scored * cfg.vocab_size * (itemsize + 8)


def kv_bytes_per_token(model: Any) -> int:
    """Bytes of key/value cache one token takes in ``model`` (all layers, keys and values)."""
    config = _text_config(model.config)
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return 2 * config.num_hidden_layers * kv_heads * head_dim * model.dtype.itemsize


def memory_budget(max_memory: int | None, device: Any) -> int:
    """Bytes one forward pass may take: ``max_memory``, else on CUDA ``CUDA_FREE_SHARE`` of
    the device's free memory now, else ``DEFAULT_CPU_BUDGET``."""
    if max_memory is not None:
        return max_memory
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free * CUDA_FREE_SHARE)
    return DEFAULT_CPU_BUDGET


_LIBC: Any = None  # glibc once loaded, False where there is none


def return_freed_memory() -> None:
    """Give the pages glibc holds free back to the system (``malloc_trim(0)``), once per forward pass on CPU
    (docs/evaluator.md#memory). Once per pass, not per allocation: mapping every block of 1 MiB or more on its own
    (``M_MMAP_THRESHOLD``) paid a zeroed page at each first touch of every activation: scoring 96 WiC requests on one
    thread took 5.5M page faults and 11 s of system time, under 0.9M faults with this; also mapping blocks of 16 MiB or
    more took 2.2M (issue 48). Nothing elsewhere than glibc."""
    global _LIBC
    if _LIBC is None:
        import ctypes

        try:
            _LIBC = ctypes.CDLL("libc.so.6") if sys.platform.startswith("linux") else False
            _LIBC.malloc_trim  # noqa: B018  (musl has no malloc_trim)
        except (OSError, AttributeError):
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)


def reset_peak_memory() -> None:
    """Start a new CUDA peak (the process's peak RSS cannot be reset)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.reset_peak_memory_stats()


def peak_memory() -> dict[str, float]:
    """``max_rss_mib``: the process's peak resident memory so far (``getrusage``); ``cuda_max_allocated_mib``: torch's
    peak CUDA allocation since the last :func:`reset_peak_memory` (only where CUDA is in use)."""
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux reports KiB, macOS bytes
    out = {"max_rss_mib": round(rss / (1 << 20 if sys.platform == "darwin" else 1 << 10), 1)}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda_max_allocated_mib"] = round(torch.cuda.max_memory_allocated() / (1 << 20), 1)
    return out

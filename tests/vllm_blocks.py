"""vLLM's prefix cache and counters as the tests and benches predict and read them (``--backend vllm``'s request plan:
eval/backends/vllm_scoring.py; docs/engines.md#verified). No vLLM import at module level."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Iterator, Sequence

from evalita_eval.backends.vllm_scoring import LLCall

# vLLM's counters read by ``engine_counters`` (computed prompt tokens: the first minus the second).
ENGINE_COUNTERS = ("vllm:prompt_tokens", "vllm:prompt_tokens_cached", "vllm:generation_tokens", "vllm:request_success")


def prompt_logprobs(call: LLCall) -> bool:
    """Whether the request asks for prompt log-probs."""
    return call.kind in ("prompt", "cached")


def reads_prefix_cache(call: LLCall) -> bool:
    """Whether vLLM serves this request's prompt from its prefix cache."""
    return call.kind != "prompt" and call.reads_cache


def generated(call: LLCall) -> int:
    """Tokens the engine samples: the forced continuation, else one."""
    return len(call.tokens) if call.kind == "forced" else 1


def prefix_cache_hits(prompts: Iterable[tuple[Sequence[int], bool]], block_size: int) -> Iterator[int]:
    """Per ``(prompt, reads the prefix cache)`` submitted in this order, the tokens vLLM takes
    from its prefix cache, by its rule: the longest run of whole KV blocks already cached (a
    block is identified by the whole prefix up to its end), never the prompt's last token,
    none when the request does not read it (prompt log-probs by vLLM's default); every prompt's whole blocks are cached
    after it. From an empty cache, without eviction (bench/work.py, the tests)."""
    cached: set[int] = set()
    for prompt, reads in prompts:
        # A block's key hashes its parent's key with its tokens, as vLLM's block hashes do.
        keys, parent = [], 0
        for end in range(block_size, len(prompt) + 1, block_size):
            parent = hash((parent, tuple(prompt[end - block_size : end])))
            keys.append(parent)
        hit = 0
        if reads:
            while hit + block_size <= len(prompt) - 1 and keys[hit // block_size] in cached:
                hit += block_size
        cached.update(keys)
        yield hit


def computed_prompt_tokens(prompts: Iterable[tuple[Sequence[int], bool]], block_size: int) -> int:
    """The prompt tokens vLLM computes (``prefix_cache_hits``'s rule). The calls of a plan:
    ``((c.prompt, reads_prefix_cache(c)) for c in calls)`` (no resend of ``cache_too_deep``)."""
    prompts = list(prompts)
    return sum(len(p) for p, _ in prompts) - sum(prefix_cache_hits(prompts, block_size))


def submitted_calls(calls: Sequence[LLCall], block_size: int) -> list[LLCall]:
    """The requests vLLM gets for a plan's ``calls`` (in order, from an empty cache): those,
    then the resends of the "cached" ones whose cache hit (``prefix_cache_hits``'s rule)
    reaches past their context (``LLCall.cache_too_deep``; they are in the last wave)."""
    hits = prefix_cache_hits(((c.prompt, reads_prefix_cache(c)) for c in calls), block_size)
    deep = [replace(c, reads_cache=False)
            for c, hit in zip(calls, hits) if c.kind == "cached" and c.reads_cache and hit > c.context_len]
    return [*calls, *deep]


def replica_counters(backend: Any) -> list[dict[str, float]]:
    """vLLM's own cumulative counters (``ENGINE_COUNTERS``; the engine argument ``disable_log_stats=false``) of each
    replica of a ``vllm`` backend (one replica: its own)."""
    if hasattr(backend, "actors"):  # replicas: read in each (a closure that names nothing of this module, not there)
        import ray

        stats = ray.get([actor.__ray_call__.remote(lambda replica: (replica.backend.llm.llm_engine.log_stats,
                                                                     replica.backend.llm.get_metrics()))
                         for actor in backend.actors])
    else:
        stats = [(backend.llm.llm_engine.log_stats, backend.llm.get_metrics())]
    each = []
    for log_stats, metrics in stats:
        if not log_stats:
            raise ValueError('vLLM\'s counters need --backend-arg \'vllm_engine_args={"disable_log_stats": false}\'')
        got = dict.fromkeys(ENGINE_COUNTERS, 0.0)
        for metric in metrics:
            if metric.name in got:
                got[metric.name] += getattr(metric, "value", 0.0)
        each.append(got)
    return each


def engine_counters(backend: Any) -> dict[str, float]:
    """``replica_counters`` summed: the engine work of the whole call, as one replica reports it."""
    each = replica_counters(backend)
    return {name: sum(c[name] for c in each) for name in ENGINE_COUNTERS}

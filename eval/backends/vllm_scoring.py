"""Which vLLM requests score which log-likelihood windows (``--backend vllm``; the three modes of
``--backend-arg vllm_loglikelihood``: docs/engines.md). No vLLM import at module level: the registry imports this."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from ..api import LLResult
from .engine_common import LLWindow

MODES = ("prefill", "prefix", "prompt_logprobs")
# The SamplingParams.extra_args key that ForceTokens reads: the token ids to generate.
FORCE_KEY = "evalita_force_tokens"
# vLLM 0.32 tracks at most this many token ids per request (SamplingParams.logprob_token_ids).
MAX_TRACKED_TOKENS = 128


@dataclass(frozen=True)
class LLCall:
    """One engine request of the log-likelihood path. ``kind``: "last" (the log-probs of ``tokens``, the first tokens
    of choices, at the position after ``prompt``), "forced" (generate exactly ``tokens`` after ``prompt``), "prompt"
    (prompt log-probs of ``prompt`` and the sampled position forced onto ``tokens[0]``), "cached" (as "prompt",
    reading the prefix cache, scoring the positions after ``context_len + 1``: the first token came from a "last"
    call)."""

    prompt: tuple[int, ...]
    kind: str
    tokens: tuple[int, ...]
    context_len: int = 0  # "cached": the context's length in ``prompt``
    reads_cache: bool = True  # "cached": False for the resend of ``cache_too_deep``

    def cache_too_deep(self, out: Any) -> bool:
        """A "cached" request whose cache hit covered a position it scores (vLLM returns
        prompt log-probs only for the positions it computed): to be sent again without it."""
        if self.kind != "cached" or not self.reads_cache:
            return False
        hit = out.num_cached_tokens
        if not isinstance(hit, int) or not 0 <= hit <= len(self.prompt):
            raise RuntimeError(f"vLLM returned num_cached_tokens={hit!r} for a prompt of {len(self.prompt)} tokens")
        return hit > self.context_len

    def sampling_params(self) -> Any:
        from vllm import SamplingParams

        if self.kind == "last":
            # Greedy: the sampled token is the argmax, its log-prob the best one.
            return SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=list(self.tokens), detokenize=False)
        if self.kind == "forced":
            n = len(self.tokens)
            # ignore_eos: an EOS inside a continuation must not end it early (and no stop token ids then).
            return SamplingParams(max_tokens=n, temperature=0.0, logprobs=1, ignore_eos=True, detokenize=False,
                                  extra_args={FORCE_KEY: list(self.tokens)})
        # "prompt": vLLM's default for prompt log-probs, no prefix cache; "cached" reads it.
        skip = None if self.kind == "prompt" else not self.reads_cache
        return SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1, logprobs=0,
                              allowed_token_ids=list(self.tokens), detokenize=False, skip_reading_prefix_cache=skip)

    def results(self, windows: Sequence[LLWindow], out: Any) -> dict[LLWindow, LLResult]:
        """The results of ``windows`` (those this call scores) from vLLM's ``RequestOutput``."""
        sample = out.outputs[0]
        if self.kind == "last":
            position = _positions(sample, 1, self)[0]
            best = _logprob(position, sample.token_ids[0], self).logprob
            res = {}
            for w in windows:  # its first continuation token (its only one, or the first of a longer choice)
                lp = _logprob(position, w.ids[len(self.prompt)], self).logprob
                res[w] = LLResult(_finite(lp, self), lp >= best, 1)
            return res
        if self.kind == "forced":
            if list(sample.token_ids) != list(self.tokens):
                raise RuntimeError(f"vLLM generated {list(sample.token_ids)} where the continuation "
                                   f"{list(self.tokens)} was forced: is evalita_eval.backend_support.vllm_force."
                                   "ForceTokens loaded (engine argument logits_processors)?")
            total, greedy = 0.0, True
            for token, position in zip(self.tokens, _positions(sample, len(self.tokens), self)):
                lp = _logprob(position, token, self).logprob
                total += _finite(lp, self)
                greedy = greedy and lp >= max(p.logprob for p in position.values())
            (w,) = windows
            return {w: LLResult(total, greedy, len(self.tokens))}
        (w,) = windows
        n_in = len(w.ids) - 1
        first = self.context_len + 1 if self.kind == "cached" else n_in - w.n_cont + 1
        total, greedy = 0.0, True
        for pos in range(first, n_in):
            lp = _logprob(out.prompt_logprobs[pos], w.ids[pos], self)
            total += _finite(lp.logprob, self)
            greedy = greedy and lp.rank == 1
        last = _logprob(_positions(sample, 1, self)[0], w.ids[-1], self)
        return {w: LLResult(total + _finite(last.logprob, self), greedy and last.rank == 1, n_in + 1 - first)}


def _positions(sample: Any, n: int, call: LLCall) -> list[dict]:
    if sample.logprobs is None or len(sample.logprobs) < n:
        raise RuntimeError(f"vLLM returned log-probs for {0 if sample.logprobs is None else len(sample.logprobs)} "
                           f"positions, {n} expected ({call.kind} request, prompt of {len(call.prompt)} tokens)")
    return list(sample.logprobs[:n])


def _logprob(position: dict, token: int, call: LLCall) -> Any:
    if token not in position:
        raise RuntimeError(f"vLLM returned no log-prob for token {token} ({call.kind} request, prompt of "
                           f"{len(call.prompt)} tokens)")
    return position[token]


def _finite(lp: float, call: LLCall) -> float:
    value = float(lp)
    if value != value or value in (float("inf"), float("-inf")):
        raise RuntimeError(f"vLLM returned the log-prob {value} ({call.kind} request, prompt of {len(call.prompt)} "
                           "tokens)")
    return value


def check_mode(mode: Any) -> str:
    if mode not in MODES:
        raise ValueError(f"--backend-arg vllm_loglikelihood must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def plan_loglikelihood(windows: Sequence[LLWindow], mode: str) -> list[list[tuple[LLCall, list[LLWindow]]]]:
    """The engine requests for distinct ``windows``, each with the windows it scores (in part: "prefill" scores a
    longer choice in two calls, whose results add up), in two waves (two ``generate`` calls): first the one-token
    choices of every context, with "prefill" the first token of every choice (which computes every context), then the
    longer choices. vLLM 0.32 must not get both in one batch: when any request of a batch asks for
    ``logprob_token_ids``, the sampler returns that layout for every request of the batch, and a ``logprobs=1``
    request gets -inf (vllm/v1/sample/sampler.py). The prefix cache outlives the call."""
    check_mode(mode)
    by_context: dict[tuple[int, ...], list[LLWindow]] = defaultdict(list)
    for w in windows:
        by_context[w.context].append(w)
    last: list[tuple[LLCall, list[LLWindow]]] = []
    longer: list[tuple[LLCall, list[LLWindow]]] = []
    for ctx, group in by_context.items():
        first = group if mode == "prefill" else [w for w in group if w.n_cont == 1]
        wanted = sorted({w.ids[len(ctx)] for w in first})
        for start in range(0, len(wanted), MAX_TRACKED_TOKENS):
            chunk = set(wanted[start : start + MAX_TRACKED_TOKENS])
            last.append((LLCall(ctx, "last", tuple(sorted(chunk))), [w for w in first if w.ids[len(ctx)] in chunk]))
        for w in group:
            if w.n_cont > 1:
                if mode == "prefill":
                    longer.append((LLCall(w.ids[:-1], "cached", (w.ids[-1],), context_len=len(ctx)), [w]))
                elif mode == "prefix":
                    longer.append((LLCall(ctx, "forced", w.ids[len(ctx):]), [w]))
                else:
                    longer.append((LLCall(w.ids[:-1], "prompt", (w.ids[-1],)), [w]))
    return [wave for wave in (last, longer) if wave]


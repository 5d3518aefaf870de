"""What a run will cost, printed before it starts, and a rough time left once the first batches are measured.

``RunPlan.work`` (running/plan.py) counts, per task, the requests the runner will send and the tokens the model reads
(counted with the backend's tokenizer; a backend without one, such as a chat API, gets an
estimate of 4 characters per token, marked ``~``), and for generative requests the budget of
new tokens of one request (greedy decoding stops earlier at a stop string). ``TimeEstimate`` is told by the runner of every finished request and the seconds it
took (the backend is never wrapped), measures how fast the first ones go and prints the time the
rest of the plan should take, once per request kind and then every ``every_s`` seconds.

Log-likelihoods: seconds per read token. Generations run batched, and a batch's time is its
prompt pass plus one step per new token; a step writes one token per row for nearly the price
of a whole forward, so neither seconds per generation (the first result of a batch carries the
whole batch's time: it said "2.8 h" of a 35-minute run, issue 40) nor budget tokens per second
(the first, 16-token batches of a CE run said 59 s for 140 s of 256-token NER after them) carry
over from one task to the next. A backend that times the two phases of its batches
(``generation_phases``: ``hf``, backend_support/phase_clock.py) is priced apart: the prompt
tokens left at the measured prompt tokens per second, plus the decode steps left (each request's
new-token budget over the measured rows per batch; greedy decoding may stop earlier) at the
measured seconds per step. Other backends (a server, replicas) are measured in budget tokens (a
request's prompt tokens plus its max new tokens) per second over the batches that finished
(results arriving within ``BATCH_GAP_S`` of each other are one batch, closed when the next one
starts). The line shows its basis. Requests the resume cache already holds (a rerun) are counted
apart and left out of the time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..api import GenRequest, LLRequest, RequestKind
from ..backend_support.phase_clock import GenerationPhases

LL, GEN = RequestKind.LOGLIKELIHOOD, RequestKind.GENERATE
CHARS_PER_TOKEN = 4  # without a tokenizer (chat APIs): the usual rough rate
BATCH_GAP_S = 0.05  # results of one generation batch arrive closer together than this


@dataclass
class TaskPlan:
    name: str
    kind: str  # LL or GEN
    requests: int
    prompt_tokens: int  # tokens the model reads over all requests (context and continuation)
    prompt_chars: int  # their characters (TimeEstimate converts the characters of a call to tokens)
    max_new_tokens: int = 0  # GEN: the budget of one request (the largest, should they differ)
    counted: bool = True  # False: characters / CHARS_PER_TOKEN (no tokenizer)
    cached: int = 0  # requests the resume cache holds: read back, not computed (a rerun)
    cached_tokens: int = 0  # their prompt tokens
    cached_chars: int = 0  # and characters

    @property
    def left_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens


class TokenCounter:
    """Tokens of a text with the backend's tokenizer (each distinct text encoded once), else characters / 4."""

    def __init__(self, tokenizer: Any | None) -> None:
        self.tokenizer = tokenizer
        self._seen: dict[str, int] = {}

    @property
    def exact(self) -> bool:
        return self.tokenizer is not None

    def __call__(self, text: str) -> int:
        if text not in self._seen:
            if self.tokenizer is None:
                self._seen[text] = -(-len(text) // CHARS_PER_TOKEN)
            else:
                self._seen[text] = len(self.tokenizer.encode(text, add_special_tokens=False))
        return self._seen[text]


def _number(n: int, counted: bool) -> str:
    return f"{n:,}" if counted else f"~{n:,}"


def plan_table(plans: Sequence[TaskPlan]) -> str:
    """The plan for the console: one row per task, then the totals (new tokens are a per-request budget: no total)."""
    rows = [("task", "kind", "requests", "prompt tokens", "max new tokens per request")]
    for p in plans:
        rows.append((p.name, "generate" if p.kind == GEN else "loglik", f"{p.requests:,}", _number(p.prompt_tokens, p.counted),
                     f"{p.max_new_tokens:,}" if p.kind == GEN else ""))
    counted = all(p.counted for p in plans)
    rows.append(("total", "", f"{sum(p.requests for p in plans):,}", _number(sum(p.prompt_tokens for p in plans), counted), ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    text = "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows)
    cached, requests = sum(p.cached for p in plans), sum(p.requests for p in plans)
    if cached:
        text += (f"\nresume: {cached:,} of these {requests:,} requests are in the resume cache and are read back; "
                 f"{requests - cached:,} are computed ({_number(sum(p.left_tokens for p in plans), counted)} prompt tokens)")
    return text


def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class TimeEstimate:
    """Measures the run's finished requests (``Runner.timer`` reports each one with the seconds it
    took) and prints the time the rest of the plan should take.

    A time left is only printed for what has been measured: before the first generation of a
    plan with generations finishes, the line says how many generations are left and that their
    time is not known yet, never "0 s left". Printed once per request kind as soon as it is
    measured, then every ``every_s`` seconds (a progress line for logs when stderr is no terminal)."""

    def __init__(self, plans: Sequence[TaskPlan], echo: Callable[[str], None], every_s: float = 300.0,
                 clock: Callable[[], float] = time.perf_counter, phases: GenerationPhases | None = None) -> None:
        # What is left to compute: requests read back from the resume cache never reach the backend.
        self.total_tokens = sum(p.left_tokens for p in plans if p.kind == LL)
        self.total_generations = sum(p.requests - p.cached for p in plans if p.kind == GEN)
        gen = [p for p in plans if p.kind == GEN]
        self.total_budget = sum(p.left_tokens + (p.requests - p.cached) * p.max_new_tokens for p in gen)
        # Priced apart where the backend times them: prompt tokens and new-token budgets of the generations left.
        self.phases = phases
        self.gen_prompt_left = sum(p.left_tokens for p in gen)
        self.gen_new_left = sum((p.requests - p.cached) * p.max_new_tokens for p in gen)
        self.echo = echo
        self.every_s = every_s
        self.clock = clock
        self.seconds = {LL: 0.0, GEN: 0.0}  # GEN: of the finished batches only
        self.done = {LL: 0, GEN: 0}  # LL: read tokens (characters x the plan's tokens per character); GEN: budget tokens of finished batches
        self.generations = 0  # generations finished (in finished batches or not)
        self.batches = 0  # generation batches finished
        self._open = [0, 0.0]  # the batch whose results are arriving: budget tokens, seconds
        chars = sum(p.prompt_chars - p.cached_chars for p in plans if p.kind == LL)
        self._tokens_per_char = self.total_tokens / chars if chars else 0.0
        gen_chars = sum(p.prompt_chars - p.cached_chars for p in gen)
        self._gen_tokens_per_char = sum(p.left_tokens for p in gen) / gen_chars if gen_chars else 0.0
        self._reported: set[str] = set()
        self._last_print = 0.0

    def record(self, kind: str, requests: Sequence[LLRequest | GenRequest], seconds: float) -> None:
        """``requests`` of ``kind`` finished, in ``seconds``; prints the estimate when it is due."""
        if kind == LL:
            self.seconds[LL] += seconds
            chars = sum(len(r.context) + len(r.continuation) for r in requests)  # type: ignore[union-attr]
            self.done[LL] += round(chars * self._tokens_per_char)
            self._maybe_print(LL)
            return
        prompt = sum(round(len(r.context) * self._gen_tokens_per_char) for r in requests)  # type: ignore[union-attr]
        new = sum(r.max_new_tokens for r in requests)  # type: ignore[union-attr]
        budget = prompt + new
        self.gen_prompt_left = max(0, self.gen_prompt_left - prompt)
        self.gen_new_left = max(0, self.gen_new_left - new)
        self.generations += len(requests)
        if seconds >= BATCH_GAP_S and self._open[0]:
            self._close_batch()  # a new batch started: the one before it is finished
        self._open[0] += budget
        self._open[1] += seconds
        if self.generations >= self.total_generations:
            self._close_batch()  # the last results: nothing else will close their batch
        if self.batches or self._phased:
            self._maybe_print(GEN)

    def _close_batch(self) -> None:
        tokens, seconds = self._open
        self.done[GEN] += tokens
        self.seconds[GEN] += seconds
        self.batches += 1
        self._open = [0, 0.0]

    @property
    def _phased(self) -> bool:
        """The backend timed prompt passes and decode steps apart (``generation_phases``)."""
        return self.phases is not None and self.phases.measured

    def _generations_left_s(self) -> float:
        """The prompt tokens left at the measured prompt rate, plus the decode steps left at the measured step time."""
        p = self.phases
        assert p is not None
        steps_left = self.gen_new_left / p.rows_per_batch
        return self.gen_prompt_left * p.prompt_s / p.prompt_tokens + steps_left * p.step_s / p.steps

    def remaining_s(self) -> tuple[float, list[str]]:
        """Seconds the measured kinds' rest should take at the rates measured so far, and the kinds not measured yet."""
        left = self._left()
        total, unmeasured = 0.0, []
        for kind in (LL, GEN):
            if not left[kind]:
                continue
            if kind == GEN and self._phased:
                total += self._generations_left_s()
            elif self.done[kind] and self.seconds[kind] > 0:
                total += left[kind] * self.seconds[kind] / self.done[kind]
            else:
                unmeasured.append(kind)
        return total, ["generations" if k == GEN else "log-likelihoods" for k in unmeasured]

    def _left(self) -> dict[str, int]:
        """LL: read tokens left; GEN: budget tokens left (the open batch's results counted as done)."""
        return {LL: max(0, self.total_tokens - self.done[LL]), GEN: max(0, self.total_budget - self.done[GEN] - self._open[0])}

    def line(self) -> str:
        """The estimate as printed: the time left of what is measured, the rates and their basis, the generations left."""
        seconds, unmeasured = self.remaining_s()
        if unmeasured and (seconds <= 0 or len(unmeasured) == 2):
            head = "time left not known yet"  # nothing measured covers the work left: no number rather than "0 s"
        else:
            head = f"about {format_duration(seconds)} left" + (" for the log-likelihoods" if unmeasured else "")
        rates = []
        if self.done[LL] and self.seconds[LL] > 0:
            rates.append(f"{self.done[LL] / self.seconds[LL]:,.0f} read tokens/s")
        if self._phased:
            p = self.phases
            assert p is not None
            rates.append(f"{p.prompt_tokens / p.prompt_s:,.0f} prompt tokens/s and {p.step_s / p.steps:.2f} s per decode step "
                         f"(~{p.rows_per_batch:.0f} rows) over {p.batches} finished generation batch{'es' if p.batches > 1 else ''}")
        elif self.done[GEN] and self.seconds[GEN] > 0:
            rates.append(f"{self.done[GEN] / self.seconds[GEN]:,.0f} budget tokens/s over {self.batches} finished "
                         f"generation batch{'es' if self.batches > 1 else ''}")
        parts = [f"{', '.join(rates)} so far"] if rates else []
        if self.total_generations:
            left = max(0, self.total_generations - self.generations)
            if self._phased:
                parts.append(f"{left:,} of {self.total_generations:,} generations left ({self.gen_prompt_left:,} prompt tokens, "
                             f"{self.gen_new_left:,} new tokens at most)")
            else:
                parts.append(f"{left:,} of {self.total_generations:,} generations left ({self._left()[GEN]:,} budget tokens)")
        if unmeasured:
            parts.append(f"{' and '.join(unmeasured)} not measured yet")
        return f"estimate: {head} ({'; '.join(parts)})"

    def _maybe_print(self, kind: str) -> None:
        now = self.clock()
        if kind in self._reported and now - self._last_print < self.every_s:
            return
        self._reported.add(kind)
        self._last_print = now
        self.echo(self.line())


def announce(runner: Any, plan: Any, backend: Any, echo: Callable[[str], None], every_s: float = 300.0) -> TimeEstimate:
    """Print the run's plan (``running/plan.py``: the one ``Runner.run`` executes) and have the runner
    report its finished requests to the estimator (returned)."""
    plans = plan.work(backend.tokenizer)
    echo(plan_table(plans))
    estimate = TimeEstimate(plans, echo, every_s=every_s, phases=getattr(backend, "generation_phases", None))
    runner.timer = estimate.record
    return estimate

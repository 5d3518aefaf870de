"""What a run will cost, printed before it starts, and a rough time left once the first batches are measured; how
each kind is priced and why, the resume cache's requests counted apart: docs/evaluator.md (the plan, the estimate)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..api import GenRequest, LLRequest, RequestKind
from ..backend_support.phase_clock import GenerationPhases
from .console import columns

LL, GEN = RequestKind.LOGLIKELIHOOD, RequestKind.GENERATE
CHARS_PER_TOKEN = 4  # without a tokenizer (chat APIs): the usual rough rate
BATCH_GAP_S = 0.05  # results of one generation batch arrive closer together than this
# A log-likelihood result in under this share of the time its tokens took at the last call's rate came with it
AT_ONCE = 0.05


@dataclass
class TaskPlan:
    name: str
    kind: str  # LL or GEN
    requests: int
    prompt_tokens: int  # tokens the model reads over all requests (context and continuation)
    max_new_tokens: int = 0  # GEN: the budget of one request (the largest, should they differ)
    counted: bool = True  # False: characters / CHARS_PER_TOKEN (no tokenizer)
    cached: int = 0  # requests the resume cache holds: read back, not computed (a rerun)
    cached_tokens: int = 0  # their prompt tokens
    rows: int = 0  # LL: the forward rows of the requests left (``scoring_work``)
    row_tokens: int = 0  # and their tokens

    @property
    def left_tokens(self) -> int:
        return self.prompt_tokens - self.cached_tokens


class TokenCounter:
    """Tokens of a text with the backend's tokenizer (each distinct text encoded once), else characters / 4."""

    def __init__(self, tokenizer: Any | None, attention_span: int | None = None) -> None:
        self.tokenizer, self.attention_span = tokenizer, attention_span
        self._seen: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        if text not in self._seen:
            self._seen[text] = (-(-len(text) // CHARS_PER_TOKEN) if self.tokenizer is None
                                else len(self.tokenizer.encode(text, add_special_tokens=False)))
        return self._seen[text]


def scoring_work(requests: Sequence[LLRequest], count: TokenCounter, seen: set[str]) -> tuple[int, int]:
    """The forward rows and their tokens that log-likelihood ``requests`` make the model compute: a row reads the
    context and all but the last token of the continuation, and the one-token choices of one context share a row
    (lm-eval's grouping, backends/hf_batches.py); ``seen``: the contexts whose shared row is counted already. With
    the model's ``attention_span`` a row of n tokens counts n + n^2 // span (its attention: ``Backend``)."""
    rows = tokens = 0
    span = count.attention_span
    for r in requests:
        cont = count(r.continuation)
        if cont == 1 and r.context in seen:
            continue
        seen.update([r.context] if cont == 1 else [])
        n = count(r.context) + cont - 1
        rows, tokens = rows + 1, tokens + n + (n * n // span if span else 0)
    return rows, tokens


def fit_cost(calls: Sequence[tuple[int, int, float]]) -> tuple[float, float]:
    """Seconds per forward row and per token: least squares of seconds = a x rows + b x tokens over the measured
    calls (rows, tokens, seconds). The two are told apart only where the calls' tokens per row differ by 2x or more
    and neither comes out negative; else tokens alone, at their mean rate."""
    rr, tt, rt = (sum(c[i] * c[j] for c in calls) for i, j in ((0, 0), (1, 1), (0, 1)))
    rs, ts = (sum(c[i] * c[2] for c in calls) for i in (0, 1))
    per_row = [c[1] / c[0] for c in calls if c[0]]
    det = rr * tt - rt * rt
    if per_row and max(per_row) >= 2 * min(per_row) and det > 0:
        a, b = (rs * tt - ts * rt) / det, (ts * rr - rs * rt) / det
        if a >= 0 and b >= 0:
            return a, b
    return 0.0, sum(c[2] for c in calls) / sum(c[1] for c in calls)


def _number(n: int, counted: bool) -> str:
    return f"{n:,}" if counted else f"~{n:,}"


def plan_table(plans: Sequence[TaskPlan]) -> str:
    """The plan for the console: one row per task, then the totals (new tokens are a per-request budget: no total)."""
    rows = [("task", "kind", "requests", "prompt tokens", "max new tokens per request")]
    for p in plans:
        rows.append((p.name, "generate" if p.kind == GEN else "loglik", f"{p.requests:,}",
                     _number(p.prompt_tokens, p.counted), f"{p.max_new_tokens:,}" if p.kind == GEN else ""))
    counted = all(p.counted for p in plans)
    cached, requests = sum(p.cached for p in plans), sum(p.requests for p in plans)
    rows.append(("total", "", f"{requests:,}", _number(sum(p.prompt_tokens for p in plans), counted), ""))
    text = columns(rows, text={0, 1})
    if cached:
        text += (f"\nresume: {cached:,} of these {requests:,} requests are in the resume cache and are read back; "
                 f"{requests - cached:,} are computed "
                 f"({_number(sum(p.left_tokens for p in plans), counted)} prompt tokens)")
    return text


def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class TimeEstimate:
    """Measures the run's finished requests (``Runner.timer`` reports each one with the seconds it took) and prints
    the time the rest of the plan should take, for what has been measured only (never "0 s left"): once per request
    kind as soon as it is measured, then every ``every_s`` seconds."""

    def __init__(self, plans: Sequence[TaskPlan], echo: Callable[[str], None], every_s: float = 300.0,
                 clock: Callable[[], float] = time.perf_counter, phases: GenerationPhases | None = None,
                 count: TokenCounter | None = None) -> None:
        # What is left to compute: requests read back from the resume cache never reach the backend.
        self.ll_left = [sum(p.rows for p in plans if p.kind == LL), sum(p.row_tokens for p in plans if p.kind == LL)]
        self.count = count or TokenCounter(None)  # the plan's counter: the same tokens, each text encoded once
        self.ll_calls: list[tuple[int, int, float]] = []  # rows, tokens, seconds of each measured call
        self._seen: set[str] = set()  # contexts whose shared row was measured
        self.total_generations = sum(p.requests - p.cached for p in plans if p.kind == GEN)
        gen = [p for p in plans if p.kind == GEN]
        self.total_budget = sum(p.left_tokens + (p.requests - p.cached) * p.max_new_tokens for p in gen)
        # Priced apart where the backend times them: prompt tokens and new-token budgets of the generations left.
        self.phases = phases
        self.gen_prompt_left = sum(p.left_tokens for p in gen)
        self.gen_new_left = sum((p.requests - p.cached) * p.max_new_tokens for p in gen)
        self.echo, self.every_s, self.clock = echo, every_s, clock
        self.seconds, self.done = 0.0, 0  # the finished generation batches: their seconds and budget tokens
        self.generations, self.batches = 0, 0  # generations finished (in finished batches or not), batches finished
        self._open = [0, 0.0]  # the batch whose results are arriving: budget tokens, seconds
        self._reported: set[str] = set()  # the kinds whose first estimate was printed
        self._last_print = 0.0

    def record(self, kind: str, requests: Sequence[LLRequest | GenRequest], seconds: float) -> None:
        """``requests`` of ``kind`` finished, in ``seconds``; prints the estimate when it is due."""
        if kind == LL:
            rows, tokens = scoring_work(requests, self.count, self._seen)  # type: ignore[arg-type]
            self.ll_left = [max(0, self.ll_left[0] - rows), max(0, self.ll_left[1] - tokens)]
            r, t, s = self.ll_calls[-1] if self.ll_calls else (0, 0, 0.0)
            if self.ll_calls and (not rows or seconds < AT_ONCE * tokens * s / max(t, 1)):
                # Results of one measured call, reported apart: a row measured with an earlier result, or a replica's
                # unit streamed at once (its first result brought the unit's seconds; alone, the rest read as ~0 s
                # calls and made a rate of 145M read tokens/s)
                self.ll_calls[-1] = (r + rows, t + tokens, s + seconds)
            else:
                self.ll_calls.append((rows, tokens, seconds))
            self._maybe_print(LL)
            return
        prompt = sum(self.count(r.context) for r in requests)
        new = sum(r.max_new_tokens for r in requests)  # type: ignore[union-attr]
        budget = prompt + new
        self.gen_prompt_left = max(0, self.gen_prompt_left - prompt)
        self.gen_new_left = max(0, self.gen_new_left - new)
        self.generations += len(requests)
        if seconds >= BATCH_GAP_S and self._open[0]:
            self._close_batch()  # a new batch started: the one before it is finished
        self._open = [self._open[0] + budget, self._open[1] + seconds]
        if self.generations >= self.total_generations:
            self._close_batch()  # the last results: nothing else will close their batch
        if self.batches or self._phased:
            self._maybe_print(GEN)

    def _close_batch(self) -> None:
        tokens, seconds = self._open
        self.done, self.seconds, self.batches = self.done + tokens, self.seconds + seconds, self.batches + 1
        self._open = [0, 0.0]

    @property
    def _phased(self) -> bool:
        """The backend timed prompt passes and decode steps apart (``generation_phases``)."""
        return self.phases is not None and self.phases.measured

    def remaining_s(self) -> tuple[float, list[str]]:
        """Seconds the measured kinds' rest should take at the rates measured so far, and the kinds not measured yet."""
        total, unmeasured = 0.0, []
        if self.ll_left[0] and self._ll_cost is None:
            unmeasured.append("log-likelihoods")
        elif self.ll_left[0]:
            a, b = self._ll_cost
            total += a * self.ll_left[0] + b * self.ll_left[1]
        if self._gen_left and self._phased:  # the prompt tokens and the decode steps left, each at its measured rate
            p: Any = self.phases
            total += (self.gen_prompt_left * p.prompt_s / p.prompt_tokens
                      + self.gen_new_left / p.rows_per_batch * p.step_s / p.steps)
        elif self._gen_left and self.done and self.seconds > 0:
            total += self._gen_left * self.seconds / self.done
        elif self._gen_left:
            unmeasured.append("generations")
        return total, unmeasured

    @property
    def _ll_cost(self) -> tuple[float, float] | None:
        """Seconds per forward row and per token (``fit_cost``), once a call with tokens was measured. The first call
        is left out once another is measured: it carries the run's one-time costs (the weights' pages read at their
        first touch, the thread pool started), which priced the quickstart's first line 1.8x long on a quiet machine."""
        calls = self.ll_calls[1:] if len(self.ll_calls) > 1 else self.ll_calls
        measured = sum(c[1] for c in calls) and sum(c[2] for c in calls) > 0
        return fit_cost(calls) if measured else None

    @property
    def _gen_left(self) -> int:
        """Budget tokens of the generations left (the open batch's results counted as done)."""
        return max(0, self.total_budget - self.done - self._open[0])

    def line(self) -> str:
        """The estimate printed: the time left of what is measured, the rates and their basis, the generations left."""
        seconds, unmeasured = self.remaining_s()
        if unmeasured and (seconds <= 0 or len(unmeasured) == 2):
            head = "time left not known yet"  # nothing measured covers the work left: no number rather than "0 s"
        else:
            head = f"about {format_duration(seconds)} left" + (" for the log-likelihoods" if unmeasured else "")
        rates = []
        if (cost := self._ll_cost) is not None:  # read tokens: the rows' tokens (a shared context read once)
            a, b = cost
            rates.append(" + ".join(x for x in (a and f"{a:.2f} s per row", b and f"{1 / b:,.0f} read tokens/s") if x))
        if self._phased:
            p: Any = self.phases
            rates.append(f"{p.prompt_tokens / p.prompt_s:,.0f} prompt tokens/s and {p.step_s / p.steps:.2f} s per "
                         f"decode step (~{p.rows_per_batch:.0f} rows) over {p.batches} finished generation "
                         f"batch{'es' if p.batches > 1 else ''}")
        elif self.done and self.seconds > 0:
            rates.append(f"{self.done / self.seconds:,.0f} budget tokens/s over {self.batches} finished "
                         f"generation batch{'es' if self.batches > 1 else ''}")
        parts = [f"{', '.join(rates)} so far"] if rates else []
        if self.total_generations:
            left = max(0, self.total_generations - self.generations)
            tokens = (f"{self.gen_prompt_left:,} prompt tokens, {self.gen_new_left:,} new tokens at most"
                      if self._phased else f"{self._gen_left:,} budget tokens")
            parts.append(f"{left:,} of {self.total_generations:,} generations left ({tokens})")
        if unmeasured:
            parts.append(f"{' and '.join(unmeasured)} not measured yet")
        return f"estimate: {head} ({'; '.join(parts)})"

    def _maybe_print(self, kind: str) -> None:
        if kind == LL and len(self.ll_calls) < 2 and self.ll_left[0]:
            return  # the first call alone is the warm-up (``_ll_cost``): priced from the next one
        now = self.clock()
        if kind in self._reported and now - self._last_print < self.every_s:
            return
        self._reported.add(kind)
        self._last_print = now
        self.echo(self.line())


def announce(runner: Any, plan: Any, backend: Any, echo: Callable[[str], None], every_s: float = 300.0) -> TimeEstimate:
    """Print the run's plan (``running/plan.py``: the one ``Runner.run`` executes) and have the runner report its
    finished requests to the estimator (returned)."""
    plans = plan.work(backend.tokenizer, backend.attention_span)
    echo(plan_table(plans))
    estimate = TimeEstimate(plans, echo, every_s=every_s, phases=getattr(backend, "generation_phases", None),
                            count=plan.token_counter(backend.tokenizer))
    runner.timer = estimate.record
    return estimate

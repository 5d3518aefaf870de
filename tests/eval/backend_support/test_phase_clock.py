"""The two phases of a generation batch (backend_support/phase_clock.py) and the estimate that prices them apart."""

from __future__ import annotations

import pytest

from evalita_eval.api import GenRequest
from evalita_eval.backend_support.phase_clock import GenerationPhases, PhaseClock
from evalita_eval.running.estimate import GEN, TaskPlan, TimeEstimate


def test_the_prompt_pass_ends_at_the_first_new_token() -> None:
    ticks = iter([10.0, 12.0, 12.5, 13.0, 13.5])  # the prompt's put, the first new token, three more steps
    phases = GenerationPhases()
    clock = PhaseClock(phases, rows=4, prompt_tokens=400, clock=lambda: next(ticks))
    for _ in range(5):
        clock.put(None)
    clock.end()
    assert phases == GenerationPhases(batches=1, rows=4, prompt_tokens=400, prompt_s=2.0, steps=3, step_s=1.5)
    PhaseClock(phases, rows=2, prompt_tokens=50, clock=lambda: 0.0).end()  # a call that made no token: not counted
    assert phases.batches == 1


def test_generations_left_are_priced_as_prompt_tokens_and_decode_steps() -> None:
    """Issue 40: a 16-token task measured first, a 256-token task left. Budget tokens per second of the first
    batch price the 256 steps of the second like its prompt tokens; prompt rate and step time price them apart."""
    printed: list[str] = []
    phases = GenerationPhases()
    plans = [TaskPlan("wic", GEN, 4, 400, 16), TaskPlan("ner", GEN, 4, 400, 256)]
    estimate = TimeEstimate(plans, printed.append, every_s=0, clock=lambda: 0.0, phases=phases)
    # The wic batch: 400 prompt tokens in 2 s (200/s), then 15 steps in 1.5 s (0.1 s per step of 4 rows), 3.5 s in all.
    phases.batches, phases.rows, phases.prompt_tokens, phases.prompt_s, phases.steps, phases.step_s = 1, 4, 400, 2.0, 15, 1.5
    request = GenRequest("x" * 400, ("\n",), 16)  # 100 prompt tokens at 400/1600
    estimate.record(GEN, [request] * 4, 3.5)
    # left: ner's 400 prompt tokens at 200/s = 2 s, and 4 x 256 new tokens in batches of 4 rows = 256 steps x 0.1 s = 25.6 s
    assert estimate.remaining_s() == (pytest.approx(27.6), [])
    assert printed[-1] == ("estimate: about 28 s left (200 prompt tokens/s and 0.10 s per decode step (~4 rows) over 1 finished "
                           "generation batch so far; 4 of 8 generations left (400 prompt tokens, 1,024 new tokens at most))")
    # Without the phases (a server, replicas) the first batch's budget tokens per second price the same work:
    # 464 budget tokens in 3.5 s, 1,424 left = 10.7 s, not even half of it.
    plain = TimeEstimate(plans, printed.append, every_s=0, clock=lambda: 0.0)
    plain.record(GEN, [request], 3.5)
    plain.record(GEN, [request] * 3, 0.0)
    plain.record(GEN, [GenRequest("x" * 400, ("\n",), 256)], 3.5)  # the next batch starts: the first one is finished
    assert plain.remaining_s()[0] == pytest.approx((1424 - 356) * 3.5 / 464)

"""Where a generation batch's time goes: the pass over its prompts, then one step per new token (docs/evaluator.md,
the time estimate). ``PhaseClock``, a transformers streamer, only reads the clock; ``GenerationPhases`` adds up what it
measured, and running/estimate.py prices the prompts and the steps left apart."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class GenerationPhases:
    """What the finished generation batches of a backend took, summed (a backend's ``generation_phases``)."""

    batches: int = 0
    rows: int = 0  # generations in those batches
    prompt_tokens: int = 0  # tokens of the prompt passes (padding included: it is computed)
    prompt_s: float = 0.0
    steps: int = 0  # decode steps after the prompt pass's token (one forward of the whole batch each)
    step_s: float = 0.0

    @property
    def measured(self) -> bool:
        return self.batches > 0 and self.prompt_tokens > 0 and self.prompt_s > 0 and self.steps > 0 and self.step_s > 0

    @property
    def rows_per_batch(self) -> float:
        return self.rows / self.batches


class PhaseClock:
    """A streamer for one ``generate`` call of ``rows`` prompts of ``prompt_tokens`` tokens: the time to the first new
    token is the prompt pass, the time after it the decode steps. It has the two methods of transformers' streamer
    (``generate`` calls nothing else, and checks no type), so this module needs no transformers import."""

    def __init__(self, phases: GenerationPhases, rows: int, prompt_tokens: int,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.phases, self.rows, self.prompt_tokens, self.clock = phases, rows, prompt_tokens, clock
        self._marks: list[float] = []  # the prompt's put, the first new token's, the last one's
        self._steps = 0

    def put(self, value: Any) -> None:
        now = self.clock()
        if len(self._marks) < 2:
            self._marks.append(now)
        else:
            self._marks[2:] = [now]
            self._steps += 1

    def end(self) -> None:
        if len(self._marks) < 2:
            return  # no new token: nothing to split
        start, first, last = self._marks[0], self._marks[1], self._marks[-1]
        p = self.phases
        p.batches, p.rows, p.prompt_tokens = p.batches + 1, p.rows + self.rows, p.prompt_tokens + self.prompt_tokens
        p.prompt_s, p.steps, p.step_s = p.prompt_s + first - start, p.steps + self._steps, p.step_s + last - first

"""The ``Metric`` type of task declarations (``TaskSpec.metrics``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class Metric:
    """A corpus-level score over the sample dicts of ``samples/*.jsonl`` (lighteval-style).

    ``sample`` turns one sample into its item value (a 0/1 hit, a pair of label lists...),
    ``corpus`` aggregates the item values of all samples, in order, into the score.
    ``needs_loglikelihoods``: computable only from every choice's log-likelihood (``acc_norm``),
    so not from generated answers (``--setting ce|ce-ni|oe``).
    """

    name: str
    sample: Callable[[dict], Any]
    corpus: Callable[[list], float]
    higher_is_better: bool = True
    description: str = ""
    needs_loglikelihoods: bool = False

    def __call__(self, samples: Sequence[dict]) -> float:
        return float(self.corpus([self.sample(s) for s in samples]))

    def __str__(self) -> str:
        return self.name

"""The ``Metric`` type of task declarations (``TaskSpec.metrics``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

# What a metric's item values are (``Metric.kind``).
HITS = "hits"  # a 0/1 hit per item (the prediction equals the gold answer), the score their mean
CORPUS = "corpus"  # anything else: a score of the whole corpus (an F1, a mean ROUGE...)
MetricKind = Literal["hits", "corpus"]


@dataclass(frozen=True)
class Metric:
    """A corpus-level score over the sample dicts of ``samples/*.jsonl`` (lighteval-style).

    ``sample`` turns one sample into its item value (a 0/1 hit, a pair of label lists...),
    ``corpus`` aggregates the item values of all samples, in order, into the score.
    ``needs_loglikelihoods``: computable only from every choice's log-likelihood (``acc_norm``),
    so not from generated answers (``--setting ce|ce-ni|oe``).

    ``kind`` and ``higher_is_better`` are what the reports read: a ``HITS`` metric is compared
    by McNemar's test on the discordant items and its chance level is exact (the mean of
    1/choices); a ``CORPUS`` one by a paired bootstrap and a seeded chance estimate; runs are
    ranked best first in the declared direction.
    """

    name: str
    sample: Callable[[dict], Any]
    corpus: Callable[[list], float]
    higher_is_better: bool = True
    description: str = ""
    needs_loglikelihoods: bool = False
    kind: MetricKind = CORPUS

    def __post_init__(self) -> None:
        if self.kind not in (HITS, CORPUS):
            raise ValueError(f"metric {self.name!r}: kind {self.kind!r}, expected {HITS!r} or {CORPUS!r}")

    def __call__(self, samples: Sequence[dict]) -> float:
        return float(self.corpus([self.sample(s) for s in samples]))

    def __str__(self) -> str:
        return self.name

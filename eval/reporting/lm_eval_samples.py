"""One lm-eval ``samples_<task>_<time>.jsonl`` read into the samples our runner writes, checked first.

Every line is validated as lm-eval 0.4 logs a sample (``LmEvalSample``) before anything is scored,
and each of these is one line naming the file, the line and the ``doc_id`` (never a score):

* a log-likelihood (``resps`` or ``filtered_resps`` of a choice task) that is not a finite number
  ≤ 0 (``nan``, ``inf``, ``12.5``: no probability has a positive logarithm);
* as many log-likelihoods as the prompt has choices;
* a ``doc_id`` logged twice, the same document or another one (lm-eval appends to a samples file
  of the same timestamp: a rerun logs every item again);
* a generative sample whose filtered response is not a text.

Generated answers outside the task's declared answer format (``TaskSpec.output_pattern``: NER, REL,
LS) are counted as ``unparsed``, the count ``evalita-eval run`` records for the same tasks
(eval/settings/constrained.py ``format_failures``, which this layer may not import).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Union

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr, ValidationError

from .lm_eval_folder import invalid_key
from .lm_eval_tasks import is_choice_task, lm_eval_sample
from .tables import ScoresError

# A response as lm-eval's samples file writes it: every scalar turned into a string (utils.sanitize_list).
Scalar = Union[StrictStr, float, StrictBool]


class LmEvalSample(BaseModel):
    """The keys of an lm-eval sample record that a score is computed from (others are kept, unread)."""

    model_config = ConfigDict(extra="allow")

    doc_id: Union[StrictInt, StrictStr]
    doc: dict[str, Any]
    arguments: Union[dict[str, dict[str, Any]], list[list[Any]]]
    resps: list[Any]
    filtered_resps: list[Any]
    doc_hash: Union[StrictStr, None] = None

    def context(self) -> str:
        """The prompt lm-eval sent for the first request (its first argument)."""
        first = self.arguments["gen_args_0"]["arg_0"] if isinstance(self.arguments, dict) else self.arguments[0][0]
        if not isinstance(first, str):
            raise ValueError("arguments: the first request's context is not a text")
        return first


class DamagedSample(ValueError):
    """A sample that validates as a record but cannot be a real one (the message names the key)."""


def log_likelihood(value: Any, key: str) -> float:
    """A logged log-likelihood (lm-eval writes a string): a finite number ≤ 0, else DamagedSample naming ``key``."""
    try:
        number = float(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else math.nan
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number > 0:
        raise DamagedSample(f"{key} is {value!r}, not a log-likelihood (a finite number ≤ 0)")
    return number


def _greedy(value: Any) -> bool:
    return value is True or value == "True"


def choice_responses(sample: LmEvalSample) -> list[tuple[float, bool]]:
    """(log-likelihood, is_greedy) per choice, each of ``filtered_resps`` and ``resps`` checked."""
    pairs = []
    for i, pair in enumerate(sample.filtered_resps):
        if not (isinstance(pair, list) and len(pair) == 2):
            raise DamagedSample(f"filtered_resps[{i}] is not [log-likelihood, is_greedy]")
        pairs.append((log_likelihood(pair[0], f"filtered_resps[{i}][0]"), _greedy(pair[1])))
    for i, repeats in enumerate(sample.resps):
        for j, pair in enumerate(repeats if isinstance(repeats, list) else [repeats]):
            if not (isinstance(pair, list) and pair):
                raise DamagedSample(f"resps[{i}][{j}] is not [log-likelihood, is_greedy]")
            log_likelihood(pair[0], f"resps[{i}][{j}][0]")
    return pairs


def generated_text(sample: LmEvalSample) -> str:
    if len(sample.filtered_resps) != 1 or not isinstance(sample.filtered_resps[0], str):
        raise DamagedSample("filtered_resps is not [the generated text]")
    return sample.filtered_resps[0]


def _records(path: Path) -> list[tuple[int, LmEvalSample]]:
    records = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append((number, LmEvalSample.model_validate_json(line)))
        except ValidationError as err:
            raise ScoresError(f"{path}:{number}: not an lm-eval sample ({invalid_key(err)})") from None
    return records


def _check_once(path: Path, records: list[tuple[int, LmEvalSample]]) -> None:
    first: dict[Any, tuple[int, LmEvalSample]] = {}
    for number, record in records:
        if record.doc_id in first:
            line, earlier = first[record.doc_id]
            what = "the same document again" if earlier.doc == record.doc else "another document (a different doc)"
            raise ScoresError(f"{path}:{number}: doc_id {record.doc_id!r} logged twice (first at line {line}, "
                              f"here {what}); each document once per samples file: not scored")
        first[record.doc_id] = (number, record)


def read_task_samples(path: Path, entry: str, prompt: str) -> tuple[list[dict], dict[str, float]]:
    """Our runner's samples of an lm-eval samples file, and our metrics' scores ({metric: value, "n", "unparsed"?})."""
    from evalita_data.registry import task_of_entry

    from ..metrics import metric_of
    spec = task_of_entry(entry)
    process, choice_task = lm_eval_sample(entry, prompt), is_choice_task(entry)
    records = _records(path)
    _check_once(path, records)
    samples = []
    for number, record in records:
        try:
            responses: list = choice_responses(record) if choice_task else [generated_text(record)]
            sample = {"doc_id": record.doc_id, "prompt": record.context(), **process(record.doc, responses)}
        except (DamagedSample, KeyError, IndexError, TypeError, ValueError) as err:
            raise ScoresError(f"{path}:{number}: doc_id {record.doc_id!r}: {err}; "
                              f"not an lm-eval sample of {entry} {prompt}") from None
        samples.append(sample)
    samples.sort(key=lambda s: (str(type(s["doc_id"])), s["doc_id"]))
    scores: dict[str, float] = {**{m.name: metric_of(entry, m.name)(samples) for m in spec.metrics}, "n": len(samples)}
    if not choice_task and spec.output_pattern is not None:
        answer_format = re.compile(spec.output_pattern)
        scores["unparsed"] = sum(answer_format.fullmatch(s["generation"]) is None for s in samples)
    return samples, scores

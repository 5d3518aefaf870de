"""lm-eval's output read and checked: which run of a folder, its ``results_<time>.json`` and its
``samples_<task>_<time>.jsonl`` as the samples our runner writes (docs/statistics.md, "lm-eval output folders as
runs"). Nothing is read through a link that leaves the folder the user named."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, TypeVar, Union

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from .lm_eval_tasks import is_choice_task, lm_eval_sample
from ..record import RecordError

_RESULTS_NAME = re.compile(r"^results_(.+)\.json$")
Args = TypeVar("Args", bound=BaseModel)


class LmEvalConfig(BaseModel):
    """``config`` of an lm-eval results file: what lm-eval ran with (each can change a number)."""

    model_config = ConfigDict(extra="allow")

    model: Union[StrictStr, None] = None
    model_args: Union[StrictStr, dict[str, Any], None] = None
    device: Union[StrictStr, None] = None
    limit: Union[float, None] = None
    gen_kwargs: Union[StrictStr, dict[str, Any], None] = None
    random_seed: Union[int, None] = None
    model_dtype: Union[StrictStr, None] = None
    model_revision: Union[StrictStr, None] = None
    model_num_parameters: Union[StrictInt, None] = None


class LmEvalResults(BaseModel):
    """The keys of an lm-eval 0.4 ``results_<time>.json`` this reader uses."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    results: dict[str, dict[str, Any]]
    configs: dict[str, Any] = {}
    group_subtasks: dict[str, Any] = {}
    n_shot: dict[str, Union[int, None]] = Field(default={}, alias="n-shot")
    config: LmEvalConfig = LmEvalConfig()
    model_name: Union[StrictStr, None] = None
    lm_eval_version: Union[StrictStr, None] = None
    transformers_version: Union[StrictStr, None] = None
    chat_template: Union[StrictStr, None] = None
    fewshot_as_multiturn: Union[bool, None] = None
    system_instruction: Union[StrictStr, None] = None

    def group_acc(self) -> float | None:
        """lm-eval's own ``evalita-mp`` group ``acc`` (not the benchmark's score: lm_eval_runs.LM_EVAL_GROUP_NOTE)."""
        value = self.results.get("evalita-mp", {}).get("acc,none")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class ModelArgs(BaseModel):
    """The ``--model_args`` a number depends on (lm-eval passes the others to the model's loader)."""

    model_config = ConfigDict(extra="allow")

    pretrained: Union[StrictStr, None] = None
    revision: Union[StrictStr, None] = None
    dtype: Union[StrictStr, None] = None


class GenKwargs(BaseModel):
    """``--gen_kwargs``: every key changes the generations; the token budget is also our ``max_new_tokens``."""

    model_config = ConfigDict(extra="allow")

    max_gen_toks: Union[int, None] = None


def invalid_key(err: ValidationError) -> str:
    """'config.limit: Input should be a valid number' of a pydantic error: its first key, without the type
    tags pydantic adds for each member of a union (``model_args.str``)."""
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"] if not (isinstance(p, str) and (p in _TYPE_TAGS or "[" in p)))
    return f"{where or 'the whole record'}: {first['msg']}"


_TYPE_TAGS = {"str", "int", "float", "bool", "none", "dict", "list"}


def is_results_file(path: Path) -> bool:
    """An lm-eval results file named by the user (ours is always ``results.json``)."""
    return path.is_file() and _RESULTS_NAME.match(path.name) is not None


def results_files(folder: Path) -> list[Path]:
    return sorted(list(folder.glob("results_*.json")) + list(folder.glob("*/results_*.json")))


def timestamp(results_file: Path) -> str:
    match = _RESULTS_NAME.match(results_file.name)
    assert match is not None  # only files of that name are chosen
    return match.group(1)


def inside(root: Path, path: Path) -> Path:
    """``path`` when it (resolved, links followed) stays inside ``root``; a link leaving it is refused."""
    resolved = path.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise RecordError(f"{path}: a link to {resolved}, outside {root}; not read (copy the file into the folder)")
    return path


def chosen_run(path: Path) -> tuple[Path, Path]:
    """(the folder the user named, its one lm-eval results file); ``path`` is a folder or a results file."""
    if is_results_file(path):
        return path.parent, inside(path.parent, path)
    if not (files := results_files(path)):
        raise RecordError(f"{path}: no lm-eval results_*.json here or one folder down; "
                          f"expected `lm_eval --output_path {path}`")
    if len(parents := {f.parent for f in files}) > 1:
        raise RecordError(f"{path}: lm-eval results of {len(parents)} models "
                          f"({', '.join(sorted(p.name for p in parents))}); name one model's folder")
    if len(files) > 1:
        raise RecordError(f"{path}: {len(files)} lm-eval runs ({', '.join(timestamp(f) for f in files)}); name one by "
                          f"its results file, e.g. {files[-1]}")
    return path, inside(path, files[0])


def read_results(path: Path) -> LmEvalResults:
    try:
        return LmEvalResults.model_validate(json.loads(path.read_text("utf-8")))
    except json.JSONDecodeError as err:
        raise RecordError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    except ValidationError as err:
        raise RecordError(f"{path}: {invalid_key(err)}; expected the results JSON of lm-eval") from None


def samples_file(root: Path, results_file: Path, task: str) -> Path | None:
    """The samples of ``task`` from the run of ``results_file`` (same timestamp), checked to stay inside ``root``."""
    path = results_file.parent / f"samples_{task}_{timestamp(results_file)}.jsonl"
    return inside(root, path) if path.is_file() else None


def arguments(path: Path, config: LmEvalConfig, key: str, model: type[Args]) -> Args:
    """``config.<key>`` (``model_args``, ``gen_kwargs``) checked by ``model``: lm-eval's ``k=v,k=v`` argument string
    (simple_parse_args_string) or the object it was given as; model arguments are read as texts."""
    value = getattr(config, key)
    pairs = dict(value) if isinstance(value, dict) else dict(kv.split("=", 1) for kv in (value or "").split(",")
                                                             if "=" in kv)
    try:
        return model.model_validate({str(k): str(v) for k, v in pairs.items()} if model is ModelArgs else pairs)
    except ValidationError as err:
        raise RecordError(f"{path}: config.{key}.{invalid_key(err)}") from None


def item_limit(path: Path, config: LmEvalConfig) -> int | float | None:
    """``--limit``: lm-eval logs it as a float (``6.0``); a count of items is an int, a share below 1 stays a float."""
    if config.limit is None:
        return None
    if 0 < config.limit < 1:
        return config.limit
    if not math.isfinite(config.limit) or config.limit <= 0 or config.limit != int(config.limit):
        raise RecordError(f"{path}: config.limit is {config.limit}: neither a count of items nor a share below 1")
    return int(config.limit)


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


def log_likelihood(value: Any, key: str) -> float:
    """A logged log-likelihood (lm-eval writes a string): a finite number ≤ 0, else a ValueError naming ``key``."""
    try:
        number = float(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else math.nan
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number > 0:
        raise ValueError(f"{key} is {value!r}, not a log-likelihood (a finite number ≤ 0)")
    return number


def choice_responses(sample: LmEvalSample) -> list[tuple[float, bool]]:
    """(log-likelihood, is_greedy) per choice, each of ``filtered_resps`` and ``resps`` checked."""
    pairs = []
    for i, pair in enumerate(sample.filtered_resps):
        if not (isinstance(pair, list) and len(pair) == 2):
            raise ValueError(f"filtered_resps[{i}] is not [log-likelihood, is_greedy]")
        pairs.append((log_likelihood(pair[0], f"filtered_resps[{i}][0]"), pair[1] is True or pair[1] == "True"))
    for i, repeats in enumerate(sample.resps):
        for j, pair in enumerate(repeats if isinstance(repeats, list) else [repeats]):
            if not (isinstance(pair, list) and pair):
                raise ValueError(f"resps[{i}][{j}] is not [log-likelihood, is_greedy]")
            log_likelihood(pair[0], f"resps[{i}][{j}][0]")
    return pairs


def generated_text(sample: LmEvalSample) -> str:
    if len(sample.filtered_resps) != 1 or not isinstance(sample.filtered_resps[0], str):
        raise ValueError("filtered_resps is not [the generated text]")
    return sample.filtered_resps[0]


def _records(path: Path) -> list[tuple[int, LmEvalSample]]:
    records = []
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append((number, LmEvalSample.model_validate_json(line)))
        except ValidationError as err:
            raise RecordError(f"{path}:{number}: not an lm-eval sample ({invalid_key(err)})") from None
    return records


def _check_once(path: Path, records: list[tuple[int, LmEvalSample]]) -> None:
    first: dict[Any, tuple[int, LmEvalSample]] = {}
    for number, record in records:
        if record.doc_id in first:
            line, earlier = first[record.doc_id]
            what = "the same document again" if earlier.doc == record.doc else "another document (a different doc)"
            raise RecordError(f"{path}:{number}: doc_id {record.doc_id!r} logged twice (first at line {line}, "
                              f"here {what}); each document once per samples file: not scored")
        first[record.doc_id] = (number, record)


def read_task_samples(path: Path, entry: str, prompt: str) -> tuple[list[dict], dict[str, float]]:
    """Our runner's samples of an lm-eval samples file, and our metrics' scores ({metric: value, "n", "unparsed"?})."""
    from evalita_data.registry import task_of_entry

    from ..metrics import format_failures, metric_of
    spec = task_of_entry(entry)
    process, choice_task = lm_eval_sample(entry, prompt), is_choice_task(entry)
    records = _records(path)
    _check_once(path, records)
    samples = []
    for number, record in records:
        try:
            responses: list = choice_responses(record) if choice_task else [generated_text(record)]
            sample = {"doc_id": record.doc_id, "prompt": record.context(), **process(record.doc, responses)}
        except (KeyError, IndexError, TypeError, ValueError) as err:
            raise RecordError(f"{path}:{number}: doc_id {record.doc_id!r}: {err}; "
                              f"not an lm-eval sample of {entry} {prompt}") from None
        samples.append(sample)
    samples.sort(key=lambda s: (str(type(s["doc_id"])), s["doc_id"]))
    scores: dict[str, float] = {**{m.name: metric_of(entry, m.name)(samples) for m in spec.metrics}, "n": len(samples)}
    # Answers outside the declared format (NER, REL, LS) are `unparsed`, as `evalita-eval run` counts them.
    if not choice_task and spec.output_pattern is not None:
        scores["unparsed"] = format_failures(spec, [s["generation"] for s in samples])
    return samples, scores

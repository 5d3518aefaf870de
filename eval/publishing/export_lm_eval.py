"""``evalita-eval export-lm-eval``: lm-evaluation-harness task YAMLs for our datasets (docs/lm-eval-export.md). The
prompts are our registry's Jinja templates, rendered by lm-eval itself; a ``utils.py`` written next to the YAMLs
points ``process_results`` and the aggregations at this module, so lm-eval reports the numbers ``run`` reports."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from evalita_data.hub.names import check_org
from evalita_data.taskspec import MCPrompt, Metric

from ..reporting.lm_eval_tasks import LM_EVAL_PREFIX as PREFIX, lm_eval_sample  # no pydantic: lm-eval imports this
from ..sources.entries import TaskEntry, all_entries


@dataclass(frozen=True)
class FunctionRef:
    """A ``!function utils.<name>`` value in a task YAML."""

    name: str


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(FunctionRef, lambda d, v: d.represent_scalar("!function", f"utils.{v.name}"))


def task_name(entry: TaskEntry, prompt: str) -> str:
    return f"{PREFIX}_{entry.name}_{prompt}"


def _with_derived(entry: TaskEntry, template: str) -> str:
    sets = "".join(f"{{% set {name} = {expr} %}}" for name, expr in entry.spec.derived.items())
    return sets + template


def dataset_fields(entry: TaskEntry, org: str | None, data_dir: Path | None, official: bool) -> dict:
    """Where lm-eval reads the entry: our layout (``ORG/<task>`` or ``DIR/<task>``, our split
    names) or, with ``official``, the Evalita-LLM copy ``ORG/<dataset>`` and its split names."""
    spec = entry.spec
    if official:
        hub = spec.hub_splits
        assert hub is not None and org is not None
        return {"dataset_path": f"{org}/{hub.dataset}", "dataset_name": hub.config or entry.config,
                "test_split": hub.test, "fewshot_split": hub.fewshot}
    # Absolute, not resolved: a build folder links to .evalita-build.versions/<id>, which the next build replaces.
    path = (f"{org}/{entry.task_id}" if org is not None
            else os.path.join(os.path.abspath(Path(data_dir).expanduser()), entry.task_id))
    return {"dataset_path": path, "dataset_name": entry.config or "default",
            "test_split": spec.eval_split, "fewshot_split": spec.fewshot_split}


def task_yaml(entry: TaskEntry, prompt: str, dataset: dict) -> dict:
    spec = entry.spec
    p = spec.prompt(prompt)
    doc = {"task": task_name(entry, prompt), "task_alias": f"{entry.name} {prompt}",
           "tag": f"{PREFIX}_{entry.name}_tasks", **{k: v for k, v in dataset.items() if v is not None},
           "output_type": spec.output_type, "doc_to_text": _with_derived(entry, p.template)}
    if isinstance(p, MCPrompt):
        doc["doc_to_choice"] = (list(p.choices) if isinstance(p.choices, list)
                                else _with_derived(entry, "{{" + p.choices + "}}"))
        doc["doc_to_target"] = _with_derived(entry, "{{" + spec.target + "}}")
    else:
        doc["doc_to_target"] = _with_derived(entry, spec.target)
        doc["generation_kwargs"] = {"until": list(spec.stop), "max_gen_toks": spec.max_new_tokens, "do_sample": False}
    doc["process_results"] = FunctionRef(f"process_{entry.name}_{prompt}")
    doc["metric_list"] = [{"metric": m.name, "aggregation": FunctionRef(f"agg_{entry.name}_{m.name}"),
                           "higher_is_better": m.higher_is_better} for m in spec.metrics]
    doc["metadata"] = {"version": 1}
    return doc


def _dump(doc: dict) -> str:
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=10_000)


def utils_source(entries: list[TaskEntry]) -> str:
    lines = ['"""Written by `evalita-eval export-lm-eval`: lm-eval calls these, they score with evalita_eval."""', "",
             "from evalita_eval.publishing.export_lm_eval import aggregator, processor", ""]
    for e in entries:
        for p in e.spec.prompts:
            lines.append(f"process_{e.name}_{p.name} = processor({e.name!r}, {p.name!r})")
    lines.append("")
    # One aggregation per entry and metric: a task added to the registry may declare its own
    # Metric under a name another task also uses.
    lines += [f"agg_{e.name}_{m.name} = aggregator({e.name!r}, {m.name!r})" for e in entries for m in e.spec.metrics]
    return "\n".join(lines) + "\n"


def export(out: Path, org: str | None = None, data_dir: Path | None = None, official: bool = False,
           echo: Callable[[str], None] = print) -> list[Path]:
    """Write the YAMLs and utils.py under ``out``; datasets ``ORG/<task>`` or ``DATA_DIR/<task>``
    (``official``: the Evalita-LLM copies ``ORG/<dataset>`` with their split names)."""
    if (org is None) == (data_dir is None):
        raise ValueError("give exactly one of --org ORG or --data-dir DIR")
    if official and org is None:
        raise ValueError("--official reads the Evalita-LLM datasets of a Hub organisation: give --org (e.g. evalitahf)")
    if org is not None:
        check_org(org, "--org")
    out.mkdir(parents=True, exist_ok=True)
    entries = all_entries()
    if official:
        # Only tasks with an official Hub copy (TaskSpec.hub_splits) can be read from ORG/<dataset>.
        skipped = [e.name for e in entries if e.spec.hub_splits is None]
        entries = [e for e in entries if e.spec.hub_splits is not None]
        if skipped:
            echo(f"--official: skipped {', '.join(skipped)} (no TaskSpec.hub_splits)")
        if not entries:
            raise ValueError("--official: no registered task declares an official Hub copy (TaskSpec.hub_splits)")
    without_fewshot: set[str] = set()
    if data_dir is not None:
        entries, without_fewshot = _held_by(Path(data_dir), entries, echo)
    written = []

    def write(name: str, text: str) -> None:
        path = out / name
        path.write_text(text, "utf-8")
        written.append(path)

    groups = []
    for e in entries:
        dataset = dataset_fields(e, org, data_dir, official)
        if e.name in without_fewshot:
            dataset["fewshot_split"] = None
        names = []
        for p in e.spec.prompts:
            names.append(task_name(e, p.name))
            write(f"{names[-1]}.yaml", _dump(task_yaml(e, p.name, dataset)))
        groups.append(group := f"{PREFIX}_{e.name}")
        write(f"{group}.yaml", _dump({"group": group, "group_alias": e.name, "task": names,
                                      "metadata": {"version": 1}}))
    write(f"{PREFIX}.yaml", _dump({"group": PREFIX, "task": groups, "metadata": {"version": 1}}))
    write("utils.py", utils_source(entries))
    echo(f"{out}: {len(written)} file(s); run with: lm_eval --include_path {out} --tasks {PREFIX} "
         f"(or {PREFIX}_<task>, {task_name(entries[0], 'p1')})")
    return written


def _held_by(data_dir: Path, entries: list[TaskEntry], echo: Callable[[str], None]) -> tuple[list[TaskEntry], set[str]]:
    """The entries whose evaluation split ``data_dir`` holds, and those of them without their few-shot split (lm-eval
    would fail on a missing split, or draw few-shot examples from another split than ours): the rest left out, said."""
    from ..sources.folder import FolderSource

    source = FolderSource(data_dir)
    held = [e for e in entries if source.has_split(e, e.spec.eval_split)]
    left_out = [f"{e.name} (no {e.spec.eval_split!r})" for e in entries if e not in held]
    no_fewshot = {e.name for e in held if not source.has_split(e, e.spec.fewshot_split)}
    if left_out:
        echo(f"{data_dir}: left out {', '.join(left_out)}: the folder does not hold that split")
    if no_fewshot:
        echo(f"{data_dir}: exported without fewshot_split (0-shot only) "
             f"{', '.join(f'{e.name} (no {e.spec.fewshot_split!r})' for e in held if e.name in no_fewshot)}")
    if not held:
        raise ValueError(f"{data_dir} holds the evaluation split of no registered task; nothing exported")
    return held, no_fewshot


# ---------------------------------------------------------------- called by lm-eval (utils.py)


def item_score(metric: Metric, sample: dict) -> float:
    """One item's score on ``metric``, the number EEE reads ``is_correct`` from (``== 1``): a hit metric's own 0/1
    for the item; for a corpus metric (an F1, a ROUGE) a scored choice's correctness (prediction == gold), else the
    metric over this item alone."""
    from evalita_data.scoring.metric import HITS

    if metric.kind == HITS:
        return float(metric.sample(sample))
    if "choices" in sample and isinstance(sample.get("prediction"), int):
        return float(sample["prediction"] == sample.get("gold"))
    return float(metric([sample]))


class ScoredSample(float):
    """One item's score on one metric, as lm-eval's own ``evalita_llm`` tasks put a number in each per-sample
    metric slot (lm-eval logs it as that number, and EEE's lm-eval converter reads ``is_correct`` as ``== 1``),
    carrying the whole sample our aggregation needs (an F1 over the items is no mean of per-item numbers)."""

    sample: dict

    def __new__(cls, score: float, sample: dict) -> "ScoredSample":
        made = super().__new__(cls, score)
        made.sample = sample
        return made

    def __reduce__(self):  # pickled (lm-eval gathers across processes) with its sample
        return (ScoredSample, (float(self), self.sample))


def processor(entry_name: str, prompt: str) -> Callable[[dict, list], dict]:
    """lm-eval's process_results for a task x prompt: per metric, the item's score with the sample our metrics read."""
    process = lm_eval_sample(entry_name, prompt)
    metrics = _entry(entry_name).spec.metrics

    def per_metric(doc: dict, results: list) -> dict:
        sample = process(doc, results)
        return {m.name: ScoredSample(item_score(m, sample), sample) for m in metrics}

    return per_metric


def aggregator(entry_name: str, metric: str) -> Callable[[list], float]:
    """lm-eval's aggregation of one entry's metric: the task's own Metric over the samples."""
    [scorer] = [m for m in _entry(entry_name).spec.metrics if m.name == metric]

    def aggregate(items: list) -> float:
        return scorer([item.sample if isinstance(item, ScoredSample) else item for item in items])

    return aggregate


def _entry(name: str) -> TaskEntry:
    return next(e for e in all_entries() if e.name == name)

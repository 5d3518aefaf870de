"""lm-evaluation-harness output folders as runs for ``report`` and ``compare`` (docs/statistics.md, "lm-eval output
folders as runs"): a ``RunRecord`` built in memory, checked as a results.json is (record.parse_record of its
``to_json``). Nothing is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .lm_eval_folder import (GenKwargs, LmEvalResults, ModelArgs, arguments, chosen_run, is_results_file, item_limit,
                             read_results, read_task_samples, results_files, samples_file)
from .lm_eval_tasks import FAMILIES, entry_and_prompt
from ..record import RecordError, parse_record, read_run
from ..record.model import ConfigRecord, DataRecord, ModelRecord, RunRecord, SourceTool

LM_EVAL_GROUP_NOTE = (
    "What the Evalita-LLM paper and leaderboard report per task is the Combined Performance Score (CPS) of the task's "
    "headline metric over its prompts (CPS = (1 − (MaxP − AvgP)) · MaxP), and the mean of the ten tasks' CPS. "
    "lm-eval's `evalita-mp` group `acc` is not that score: it averages only the tasks that report `acc` "
    "(TE, AT, FAQ: 3 of 10), over their prompts, weighted by the number of items.")

Samples = dict[tuple[str, str], list[dict]]  # (entry, prompt) -> our runner's samples


def is_lm_eval_output(path: Path) -> bool:
    """An lm-eval results file, or a folder without our results.json that holds some (itself or one level down)."""
    if is_results_file(path):
        return True
    return path.is_dir() and not (path / "results.json").is_file() and bool(results_files(path))


def _tasks(results_path: Path, doc: LmEvalResults) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """The run's Evalita-LLM tasks (lm-eval name -> (entry, prompt)) and the names of other tasks, left out."""
    names = sorted(set(doc.results) | set(doc.configs))
    mapped = {t: entry_and_prompt(t) for t in names}
    other = [t for t, m in mapped.items() if m is None and t not in doc.group_subtasks
             and (not t.startswith(FAMILIES) or any(results_path.parent.glob(f"samples_{t}_*.jsonl")))]
    usable = {t: m for t, m in mapped.items() if m is not None}
    if not usable:
        raise RecordError(f"{results_path}: no Evalita-LLM task (evalita-mp_* or evalita-llm_*) among "
                          f"{', '.join(names[:6])}")
    return usable, other


def _reasons(generation: dict, results: dict) -> list[str]:
    """Why the run is not the paper's evaluation that the record's own rule (record/comparable.py, ``--limit`` among
    them) cannot see."""
    from evalita_data.registry import task_of_entry

    reasons = []
    if generation:
        reasons.append(f"lm-eval --gen_kwargs {','.join(f'{k}={v}' for k, v in generation.items())}: "
                       "the tasks' generation arguments were changed")
    left_out = sorted(f"{entry} {p.name}" for entry, prompts in results.items()
                      for p in task_of_entry(entry).prompts if p.name not in prompts)
    if left_out:
        reasons.append(f"prompts left out: {', '.join(left_out)}")
    return reasons


def _model_record(path: Path, doc: LmEvalResults) -> ModelRecord:
    args = arguments(path, doc.config, "model_args", ModelArgs)
    loaded = (doc.config.model_dtype or "").removeprefix("torch.")  # the dtype loaded (hf's get_model_info)
    return ModelRecord(doc.model_name or args.pretrained or "lm-eval model",
                       revision=args.revision or doc.config.model_revision or None,
                       dtype=loaded or args.dtype or "not recorded", model_args=args.model_dump(exclude_none=True),
                       backend=f"lm-eval {doc.config.model or ''}".strip(),
                       num_parameters=n if (n := doc.config.model_num_parameters) and n > 0 else None)


def _shots(doc: LmEvalResults, tasks: list[str]) -> tuple[int | None, str | None]:
    """The run's few-shot count; None and a note when its tasks differ (or lm-eval did not record it)."""
    counts = {t: doc.n_shot.get(t) for t in tasks}
    values = set(counts.values())
    if len(values) == 1 and None not in values:
        return next(iter(values)), None
    return None, "few-shot count per task: " + ", ".join(f"{t} {'not recorded' if k is None else k}"
                                                          for t, k in counts.items())


def _other_rule(task: str, theirs: dict[str, Any], ours: dict[str, float]) -> list[str]:
    """A note for each number lm-eval logged for ``task`` that the report shows otherwise: lm-eval's metric of the
    same name, else the headline (first), recomputed by this tool's rule (WiC: lm-eval's f1 is binary F1, ours
    macro)."""
    found, headline = [], next(iter(ours))
    for key, value in sorted(theirs.items()):
        name = key.split(",", 1)[0]
        shown = name if name in ours else headline if name in headline else None  # f1: f1_macro, ner_f1
        if shown and "stderr" not in name and isinstance(value, (int, float)) and abs(value - ours[shown]) > 1e-6:
            found.append(f"{task}: lm-eval's own {name} is {100 * value:.2f}; the report shows {shown} "
                         f"{100 * ours[shown]:.2f}, recomputed from the same samples by this tool's rule")
    return found


def _config(path: Path, doc: LmEvalResults, shots: int | None) -> ConfigRecord:
    """What lm-eval ran with, as our record's config (each can change a number)."""
    generation = arguments(path, doc.config, "gen_kwargs", GenKwargs)
    return ConfigRecord(num_fewshot=shots, limit=item_limit(path, doc.config),
                        apply_chat_template=bool(doc.chat_template),
                        fewshot_as_multiturn=doc.fewshot_as_multiturn, system_instruction=doc.system_instruction,
                        seed=doc.config.random_seed, device=doc.config.device or "not recorded",
                        gen_kwargs=generation.model_dump(exclude_none=True), max_new_tokens=generation.max_gen_toks)


def lm_eval_record(root: Path, results_path: Path) -> tuple[RunRecord, Samples]:
    """The record of the lm-eval run of ``results_path`` (in memory, the samples file each prompt was read from
    in ``sample_sources``) and its samples (no run id: another tool's lines cannot name one)."""
    doc = read_results(results_path)
    usable, other = _tasks(results_path, doc)
    results: dict = {}
    samples: Samples = {}
    sources: dict[tuple[str, str], Path] = {}
    used, missing, notes = [], [], []
    for task, (entry, prompt) in sorted(usable.items()):
        found = samples_file(root, results_path, task)
        if found is None:
            missing.append(task)
            continue
        lines, results.setdefault(entry, {})[prompt] = read_task_samples(found, entry, prompt)
        samples[(entry, prompt)] = [{"run_id": None, **line} for line in lines]
        sources[(entry, prompt)] = found
        used.append(task)
        notes += _other_rule(task, doc.results.get(task, {}), results[entry][prompt])
    if missing:
        notes.append(f"{results_path.parent}: no samples_<task>_*.jsonl of {', '.join(missing)} of the run of "
                     f"{results_path.name} (run lm-eval with --log_samples): those prompts are left out")
    if other:
        notes.append(f"{results_path}: task(s) of neither evalita-mp nor evalita-llm names left out: "
                     f"{', '.join(other)}")
    if not results:
        raise RecordError(notes[0])
    shots, shots_note = _shots(doc, used)
    notes += [shots_note] if shots_note else []
    config = _config(results_path, doc, shots)
    # What lm-eval recorded that the record's own rule cannot see (its gen_kwargs, the prompts it ran): the
    # record adds these to the reasons it derives (record/comparable.py).
    tool = SourceTool("lm-eval", doc.lm_eval_version, str(results_path), notes, doc.group_acc(),
                      _reasons(config.gen_kwargs or {}, results))
    record = RunRecord(path=results_path, status="complete", run_id=None, identity=None,
                       model=_model_record(results_path, doc), config=config,
                       data=DataRecord(f"lm-eval output {root.name}"), results=results,
                       package_versions={"lm_eval": doc.lm_eval_version, "transformers": doc.transformers_version},
                       source_tool=tool, sample_sources=sources, origin=root)
    return record, samples


def load_run(path: Path, partial: bool = False) -> RunRecord:
    """A results.json, a run folder holding one, or an lm-eval output folder or results file (one run, read in
    memory)."""
    if is_lm_eval_output(path):
        root, results_path = chosen_run(path)
        built, samples = lm_eval_record(root, results_path)
        # checked as a results.json is, the samples as a file's lines
        run = parse_record(results_path, built.to_json(), partial, in_memory=samples)
        run.sample_sources, run.origin = built.sample_sources, built.origin
        return run
    if path.is_dir():
        if not (path / "results.json").is_file():
            raise RecordError(f"{path}: neither a run folder (results.json) nor an lm-eval output folder "
                              "(results_*.json)")
        path = path / "results.json"
    return read_run(path, partial)


def lm_eval_notes(runs: list[RunRecord]) -> list[str]:
    """The report's lines on runs read from lm-eval: where from, what was left out, what the benchmark's score is."""
    notes = []
    for r in runs:
        tool = r.source_tool
        if tool is None:
            continue
        notes.append(f"{r.display}: read from the lm-eval {tool.version or ''} output {tool.results_file}; every score "
                     "recomputed from its per-sample records (samples_*.jsonl) by this tool's metrics")
        notes += tool.notes
        if tool.group_acc is not None:
            notes.append(f"{r.display}: lm-eval's own `evalita-mp` acc of this run is {100 * tool.group_acc:.2f}; "
                         "the report's per-task CPS below are the benchmark's figures")
    if notes:
        notes.append(LM_EVAL_GROUP_NOTE)
    return notes

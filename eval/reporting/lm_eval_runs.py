"""lm-evaluation-harness output folders as runs for ``report`` and ``compare``.

An lm-eval run (``--output_path DIR --log_samples``) leaves ``DIR/<model>/results_<time>.json``
and one ``samples_<task>_<time>.jsonl`` per task. Its tasks are the Evalita-LLM prompts under
one of two names: lm-eval's own ``evalita-mp`` tasks (``evalita-mp_te_prompt-1``,
``evalita-mp_ner_adg_p1``, ``evalita-mp_re_prompt-2``, ...) or those ``evalita-eval
export-lm-eval`` writes (``evalita-llm_<entry>_<prompt>``). Each logged sample (the document,
lm-eval's responses) becomes the sample our runner writes, through the same function the
exported tasks score with (export_lm_eval.processor); the scores are then recomputed by our
metrics, so that MinP/MaxP/AvgP/CPS, bootstrap intervals and paired tests come from the
per-sample records, never from lm-eval's aggregated numbers.

What cannot be read is one line naming what is missing: no results file, no samples logged
(``--log_samples``), task names of neither family.
"""

from __future__ import annotations

import atexit
import json
import re
import shutil
import tempfile
from pathlib import Path

from typing import Callable

from .runs import RunResults, load_results
from .tables import ScoresError

# The task names `evalita-eval export-lm-eval` writes: evalita-llm_<entry>_<prompt>.
LM_EVAL_PREFIX = "evalita-llm"

# lm-eval's evalita-mp task names: entry and prompt number (NER per domain; REL is "re"; SUM is the fp task).
_OFFICIAL = (
    (re.compile(r"^evalita-mp_(te|sa|wic|hs|at|faq|ls)_prompt-(\d+)$"), None),
    (re.compile(r"^evalita-mp_re_prompt-(\d+)$"), "rel"),
    (re.compile(r"^evalita-mp_ner_(adg|fic|wn)_p(\d+)$"), "ner"),
    (re.compile(r"^evalita-[ms]p_sum_task_fp(?:-small)?_p(\d+)$"), "sum"),
)
LM_EVAL_GROUP_NOTE = (
    "What the Evalita-LLM paper and leaderboard report per task is the Combined Performance Score (CPS) of the task's "
    "headline metric over its prompts (CPS = (1 − (MaxP − AvgP)) · MaxP), and the mean of the ten tasks' CPS. "
    "lm-eval's `evalita-mp` group `acc` is not that score: it averages only the tasks that report `acc` "
    "(TE, AT, FAQ: 3 of 10), over their prompts, weighted by the number of items.")


def lm_eval_sample(entry_name: str, prompt: str) -> Callable[[dict, list], dict]:
    """(document, lm-eval's responses) -> the sample our runner writes for that item: what the exported tasks
    score with (export_lm_eval.processor) and what lm-eval's logged samples are read back as."""
    from evalita_data.registry import compiled, task_of_entry
    from evalita_data.scoring.metrics import mc_prediction
    from evalita_data.taskspec import MCPrompt

    spec = task_of_entry(entry_name)
    if spec is None:
        raise KeyError(f"unknown task entry {entry_name!r}")
    task = compiled(spec.id)
    # lm-eval asks a task of choice prompts by their log-likelihoods and any other by a generation: the
    # two kinds of running/task_kinds.py that lm-eval has (no instruct setting), told by the prompts'
    # declared type, as export_lm_eval.task_yaml writes them (reporting sits below running).
    mc = any(isinstance(p, MCPrompt) for p in spec.prompts)

    def process(doc: dict, results: list) -> dict:
        if mc:
            choices = task.choices(prompt, doc)
            lls = [float(r[0]) for r in results]
            return {"choices": choices, "loglikelihoods": lls, "is_greedy": [bool(r[1]) for r in results],
                    "prediction": mc_prediction(lls, choices), "gold": task.target(doc)}
        return {"generation": results[0], "prediction": results[0], "reference": task.target(doc),
                "gold": doc[spec.gold_field]}

    return process


def entry_and_prompt(task: str) -> tuple[str, str] | None:
    """(our entry, prompt) of an lm-eval task name, or None for a name of neither family (or a group)."""
    from evalita_data.registry import task_of_entry

    for pattern, entry in _OFFICIAL:
        m = pattern.match(task)
        if m:
            groups = m.groups()
            name = groups[0] if entry is None else entry if entry != "ner" else f"ner_{groups[0]}"
            return name, f"p{int(groups[-1])}"
    m = re.match(rf"^{LM_EVAL_PREFIX}_(.+)_(p\d+)$", task)
    spec = task_of_entry(m.group(1)) if m else None
    if m and spec is not None and m.group(2) in {p.name for p in spec.prompts}:
        return m.group(1), m.group(2)
    return None


def is_lm_eval_output(path: Path) -> bool:
    """A folder without our results.json that holds lm-eval ``results_*.json`` (itself or one level down)."""
    return path.is_dir() and not (path / "results.json").is_file() and bool(_results_files(path))


def _results_files(path: Path) -> list[Path]:
    return sorted(list(path.glob("results_*.json")) + list(path.glob("*/results_*.json")))


def _latest_results(folder: Path) -> Path:
    files = _results_files(folder)
    if not files:
        raise ScoresError(f"{folder}: no lm-eval results_*.json here or one folder down; expected `lm_eval --output_path {folder}`")
    parents = {f.parent for f in files}
    if len(parents) > 1:
        raise ScoresError(f"{folder}: lm-eval results of {len(parents)} models ({', '.join(sorted(p.name for p in parents))}); "
                          "name one model's folder")
    return files[-1]  # the timestamp in the name sorts: the latest run


def _model_record(doc: dict) -> dict:
    args = str((doc.get("config") or {}).get("model_args") or "")
    fields = dict(kv.split("=", 1) for kv in args.split(",") if "=" in kv)
    name = str(doc.get("model_name") or fields.get("pretrained") or "lm-eval model")
    return {"name_or_path": name, "revision": fields.get("revision"), "dtype": fields.get("dtype"),
            "backend": f"lm-eval {(doc.get('config') or {}).get('model') or ''}".strip()}


def _float(value: object) -> float:
    return float(value)  # lm-eval may log numbers as strings


def _our_sample(process, record: dict, path: Path, line: int) -> dict:
    """Our runner's sample of one lm-eval record (document + responses), keyed to pair by the document."""
    try:
        doc, resps = record["doc"], record["filtered_resps"]
        context = record["arguments"]["gen_args_0"]["arg_0"] if isinstance(record["arguments"], dict) else record["arguments"][0][0]
        if resps and isinstance(resps[0], (list, tuple)):  # multiple choice: [log-likelihood, is_greedy] per choice
            resps = [(_float(r[0]), str(r[1]) == "True" or r[1] is True) for r in resps]
        sample = process(doc, resps)
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise ScoresError(f"{path}:{line}: not an lm-eval sample of this task ({type(err).__name__}: {err})") from None
    return {"doc_id": record.get("doc_id"), "prompt": context, **sample}


def _convert_task(path: Path, entry: str, prompt: str, out: Path) -> dict:
    from evalita_data.registry import task_of_entry

    from ..metrics import metric_of

    process = lm_eval_sample(entry, prompt)
    records = []
    for i, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ScoresError(f"{path}:{i}: not valid JSON ({err.msg})") from None
    samples = [_our_sample(process, r, path, i) for i, r in enumerate(records, 1)]
    samples.sort(key=lambda s: (str(type(s["doc_id"])), s["doc_id"]))
    (out / f"{entry}_{prompt}.jsonl").write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples), "utf-8")
    spec = task_of_entry(entry)
    return {**{m.name: metric_of(entry, m.name)(samples) for m in spec.metrics}, "n": len(samples)}


def convert_lm_eval(folder: Path, out: Path) -> tuple[Path, list[str]]:
    """Our results.json and samples/ in ``out`` from an lm-eval output folder; notes on what was left out."""
    results_path = _latest_results(folder)
    try:
        doc = json.loads(results_path.read_text("utf-8"))
    except json.JSONDecodeError as err:
        raise ScoresError(f"{results_path}:{err.lineno}: not valid JSON ({err.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict):
        raise ScoresError(f"{results_path}: no 'results' object; expected the results JSON of lm-eval")
    stamp = results_path.stem.removeprefix("results_")
    names = sorted(set(doc["results"]) | set(doc.get("configs") or {}))
    mapped = {t: entry_and_prompt(t) for t in names}
    groups = set(doc.get("group_subtasks") or {})
    family = ("evalita-mp", "evalita-sp", LM_EVAL_PREFIX)  # their names without a prompt are groups (no samples of their own)
    other = [t for t, m in mapped.items() if m is None and t not in groups
             and (not t.startswith(family) or any(results_path.parent.glob(f"samples_{t}_*.jsonl")))]
    usable = {t: m for t, m in mapped.items() if m is not None}
    if not usable:
        raise ScoresError(f"{results_path}: no Evalita-LLM task (evalita-mp_* or evalita-llm_*) among {', '.join(names[:6])}")
    (out / "samples").mkdir(parents=True, exist_ok=True)
    results, notes, shots = {}, [], set()
    missing = []
    for task, (entry, prompt) in sorted(usable.items()):
        found = sorted(results_path.parent.glob(f"samples_{task}_{stamp}.jsonl")) or sorted(results_path.parent.glob(f"samples_{task}_*.jsonl"))
        if not found:
            missing.append(task)
            continue
        results.setdefault(entry, {})[prompt] = _convert_task(found[-1], entry, prompt, out / "samples")
        shots.add((doc.get("n-shot") or {}).get(task))
    if missing:
        notes.append(f"{results_path.parent}: no samples_<task>_*.jsonl of {', '.join(missing)} "
                     "(run lm-eval with --log_samples): those prompts are left out")
    if other:
        notes.append(f"{results_path}: task(s) of neither evalita-mp nor evalita-llm names left out: {', '.join(other)}")
    if not results:
        raise ScoresError(notes[0])
    config = doc.get("config") or {}
    run = {"status": "complete", "model": _model_record(doc),
           "data": {"source": f"lm-eval output {folder.name}", "manifest_sha256": {}},
           "config": {"num_fewshot": next(iter(shots)) if len(shots) == 1 else None, "limit": config.get("limit"),
                      "apply_chat_template": bool(doc.get("chat_template")), "setting": "loglikelihood",
                      "seed": config.get("random_seed"), "split": None},
           "results": results, "source_tool": {"name": "lm-eval", "version": doc.get("lm_eval_version"),
                                               "results_file": str(results_path), "notes": notes,
                                               "group_acc": (doc["results"].get("evalita-mp") or {}).get("acc,none")}}
    (out / "results.json").write_text(json.dumps(run, ensure_ascii=False, indent=2) + "\n", "utf-8")
    return out / "results.json", notes


def load_run(path: Path, partial: bool = False) -> RunResults:
    """A results.json, a run folder holding one, or an lm-eval output folder (converted into a temporary folder)."""
    if is_lm_eval_output(path):
        tmp = Path(tempfile.mkdtemp(prefix="evalita-lm-eval-"))
        atexit.register(shutil.rmtree, tmp, True)
        results, _notes = convert_lm_eval(path, tmp)
        run = load_results(results, partial)
        run.origin = path
        return run
    if path.is_dir():
        if not (path / "results.json").is_file():
            raise ScoresError(f"{path}: neither a run folder (results.json) nor an lm-eval output folder (results_*.json)")
        path = path / "results.json"
    return load_results(path, partial)


def lm_eval_notes(runs: list[RunResults]) -> list[str]:
    """The report's lines on runs read from lm-eval: where from, what was left out, and what the benchmark's score is."""
    notes = []
    for r in runs:
        tool = r.raw.get("source_tool")
        if not isinstance(tool, dict):
            continue
        notes.append(f"{r.display}: read from the lm-eval {tool.get('version') or ''} output {r.origin}; every score "
                     "recomputed from its per-sample records (samples_*.jsonl) by this tool's metrics")
        notes += [str(n) for n in tool.get("notes") or []]
        if isinstance(tool.get("group_acc"), (int, float)):
            notes.append(f"{r.display}: lm-eval's own `evalita-mp` acc of this run is {100 * tool['group_acc']:.2f}; "
                         "the report's per-task CPS below are the benchmark's figures")
    if notes:
        notes.append(LM_EVAL_GROUP_NOTE)
    return notes

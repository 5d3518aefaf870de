"""lm-eval's names of the Evalita-LLM prompts (its own ``evalita-mp_*`` tasks or the ``evalita-llm_<entry>_<prompt>``
of ``export-lm-eval``), and one logged lm-eval sample as the sample our runner writes."""

from __future__ import annotations

import re
from typing import Callable, Sequence

# The task names `evalita-eval export-lm-eval` writes: evalita-llm_<entry>_<prompt>.
LM_EVAL_PREFIX = "evalita-llm"
# Their names without a prompt are groups (no samples of their own).
FAMILIES = ("evalita-mp", "evalita-sp", LM_EVAL_PREFIX)

# lm-eval's evalita-mp task names: entry and prompt number (NER per domain; REL is "re"; SUM is the fp task).
_OFFICIAL = (
    (re.compile(r"^evalita-mp_(te|sa|wic|hs|at|faq|ls)_prompt-(\d+)$"), None),
    (re.compile(r"^evalita-mp_re_prompt-(\d+)$"), "rel"),
    (re.compile(r"^evalita-mp_ner_(adg|fic|wn)_p(\d+)$"), "ner"),
    (re.compile(r"^evalita-[ms]p_sum_task_fp(?:-small)?_p(\d+)$"), "sum"),
)


# lm-eval's group and tag names (tasks/evalita_llm/*.yaml) -> our task ids or entries.
_MC, _GEN = ("te", "sa", "wic", "hs", "at", "faq"), ("sum", "ls", "ner", "rel")
_GROUPS = {"evalita-mp": _MC + _GEN, "evalita-mp_mc": _MC, "evalita-mp_gen": _GEN, "evalita-mp_ner_group": ("ner",),
           **{f"evalita-mp_re{tail}": ("rel",) for tail in ("", "_tasks")},
           **{f"evalita-mp_sum_fp{tail}": ("sum",) for tail in ("", "_tasks", "_small", "-small_tasks")},
           **{f"evalita-mp_{t}{tail}": (t,) for t in _MC + ("ls",) for tail in ("", "_tasks")},
           **{f"evalita-mp_ner_tasks_{d}": (f"ner_{d}",) for d in ("adg", "fic", "wn")}}
FANPAGE_NOTE = ("lm-eval's evalita-mp_sum_fp reads all of ARTeLab/fanpage test; "
                "our sum is its 100-article sample (evalita-mp_sum_fp_small)")


def from_lm_eval(names: Sequence[str]) -> tuple[list[str], list[str] | None, list[str]]:
    """--tasks with lm-eval's task, group and tag names read as ours: (task names, the prompts their prompt-level
    names ask, or None for every prompt; the notes saying each mapping). Our own names pass through unchanged.
    One run asks the same prompts of every task, so names asking different prompts of different tasks are refused."""
    out: dict[str, set[str] | None] = {}
    notes: list[str] = []
    for name in names:
        hit = entry_and_prompt(name)
        if hit is None and name in _GROUPS:
            mapped: list[tuple[str, str | None]] = [(t, None) for t in _GROUPS[name]]
        elif hit is not None:
            mapped = [hit]
        elif name.startswith("evalita-mp_ner-v2") or re.match(r"^evalita-mp_ner_(adg|fic|wn)_group$", name):
            raise ValueError(f"unknown task {name!r}: lm-eval's NER v2 prompts are not Evalita-LLM's; "
                             "its evalita-mp_ner_group (or ner, ner_adg) asks ours")
        else:
            out.setdefault(name, None)
            continue
        for task, prompt in mapped:
            asked = out.get(task, set())
            out[task] = None if prompt is None or asked is None else asked | {prompt}
        notes.append(f"--tasks: lm-eval's {name} = our {' '.join(f'{t} {p}' if p else t for t, p in mapped)}"
                     + (f" ({FANPAGE_NOTE})" if name in ("evalita-mp", "evalita-mp_gen") or "sum_fp" in name else ""))
    prompts = {frozenset(p) if p is not None else None for p in out.values()}
    if len(prompts) > 1:
        raise ValueError(f"{','.join(names)} ask different prompts of different tasks; one run asks the same "
                         "prompts of every task (--prompts): run them apart")
    only = next(iter(prompts), None)
    return list(out), sorted(only) if only is not None else None, notes


def is_choice_task(entry_name: str) -> bool:
    """lm-eval asks a task of choice prompts by their log-likelihoods, any other by a generation (the two kinds of
    running/task_kinds.py it has, which reporting, below running, may not import), told by the prompts' declared type
    as export_lm_eval.task_yaml does."""
    from evalita_data.registry import task_of_entry
    from evalita_data.taskspec import MCPrompt

    spec = task_of_entry(entry_name)
    if spec is None:
        raise KeyError(f"unknown task entry {entry_name!r}")
    return any(isinstance(p, MCPrompt) for p in spec.prompts)


def lm_eval_sample(entry_name: str, prompt: str) -> Callable[[dict, list], dict]:
    """(document, lm-eval's responses) -> the sample our runner writes for that item: what the exported tasks
    score with (export_lm_eval.processor) and what lm-eval's logged samples are read back as."""
    from evalita_data.registry import compiled, task_of_entry
    from evalita_data.scoring.metrics import mc_prediction

    mc = is_choice_task(entry_name)
    spec = task_of_entry(entry_name)
    task = compiled(spec.id)

    def process(doc: dict, results: list) -> dict:
        if mc:
            choices = task.choices(prompt, doc)
            if len(results) != len(choices):
                raise ValueError(f"{len(results)} log-likelihood(s) for {len(choices)} choices")
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

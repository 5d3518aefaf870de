"""Runs lm-evaluation-harness's own evalita_llm task files, from a copy, by their own task names
(a script for tests/data_side/hub/test_official_layout_lm_eval.py).

Usage: python lm_eval_official.py OUT.json MODEL_DIR TASKS_DIR LIMIT MAX_GEN_TOKS K ENTRY:PROMPT... [--batch-size N]
       [--output-path DIR]

TASKS_DIR is a copy of lm-eval's ``tasks/evalita_llm`` folder (YAMLs, utils.py, metrics.py) in
which only ``dataset_path`` was changed (``task_copy``). lm-eval indexes that folder alone
(``include_defaults=False``) and evaluates the task each file names (``task:``), with K shots,
the "hf" model at batch size 1 (or N) on CPU. Writes per ENTRY:PROMPT the numeric metrics and the
per-document responses; with --output-path, also lm-eval's own output folder, written as its CLI writes it
(results and --log_samples files). Run with HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1. Also used by
bench/hf_vs_lmeval.py.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from lm_eval_reference import YAMLS


def task_name(folder: Path, entry: str, prompt: str) -> str:
    """The ``task:`` of lm-eval's file for (entry, prompt); its tags (!function) are not needed here."""
    text = (folder / YAMLS[entry].format(n=prompt.removeprefix("p"))).read_text("utf-8")
    return next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("task:"))


def task_copy(dest: Path, data: Path) -> Path:
    """lm-eval's installed evalita_llm folder, copied, with only `dataset_path: evalitahf/X` -> DATA/X."""
    import lm_eval

    shutil.copytree(Path(lm_eval.__file__).parent / "tasks" / "evalita_llm", dest, ignore=shutil.ignore_patterns("__pycache__"))
    for path in dest.iterdir():
        if path.is_file() and "yaml" in path.name:
            text = path.read_text("utf-8")
            path.write_text(re.sub(r"(?m)^dataset_path: evalitahf/", f"dataset_path: {data}/", text), "utf-8")
    return dest


def main(argv: list[str]) -> None:
    options = {"--batch-size": "1", "--output-path": None}
    for flag in options:
        if flag in argv:
            at = argv.index(flag)
            options[flag], argv = argv[at + 1], argv[:at] + argv[at + 2 :]
    batch_size, output_path = int(options["--batch-size"]), options["--output-path"]
    out, model, folder, limit, max_gen, k, *pairs = argv
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    tracker = EvaluationTracker(output_path=output_path) if output_path else None

    names = {p: task_name(Path(folder), *p.split(":")) for p in pairs}
    res = simple_evaluate(
        model="hf",
        model_args=f"pretrained={model},dtype=float32",
        tasks=list(names.values()),
        task_manager=TaskManager(include_path=folder, include_defaults=False),
        num_fewshot=int(k),
        batch_size=batch_size,
        device="cpu",
        limit=int(limit),
        gen_kwargs={"max_gen_toks": int(max_gen)},
        log_samples=True,
        bootstrap_iters=0,  # no standard errors: their bootstrap of F1 takes minutes, the scores are the same
        evaluation_tracker=tracker,
    )
    if tracker is not None:  # as lm-eval's CLI saves a run (lm_eval/_cli/run.py)
        logged = res.pop("samples")
        tracker.save_results_aggregated(results=res, samples=logged)
        for name in res["configs"]:
            tracker.save_results_samples(task_name=name, samples=logged[name])
        res["samples"] = logged
    dump = {}
    for pair, name in names.items():
        dump[pair] = {
            "task": name,
            "metrics": {m: v for m, v in res["results"][name].items() if isinstance(v, (int, float)) and "stderr" not in m},
            "samples": [{"doc_id": s["doc_id"], "arguments": [list(a) for a in s["arguments"]], "resps": s["resps"]} for s in sorted(res["samples"][name], key=lambda s: s["doc_id"])],
        }
    Path(out).write_text(json.dumps(dump, ensure_ascii=False, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])

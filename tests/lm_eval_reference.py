"""Runs lm-evaluation-harness's own evalita_llm task configs on local JSONL (a script for the parity test).

Usage: python lm_eval_reference.py OUT.json MODEL_DIR DATA_DIR LIMIT MAX_GEN_TOKS ENTRY:PROMPT:K[:chat][:sys][:single]...
Each ENTRY:PROMPT:K (e.g. te:p1:0, ner_adg:p1:2:chat) loads lm-eval's YAML for that task and
prompt (includes and !function resolved), points it at DATA_DIR's JSONL files and
evaluates it with K shots with the "hf" model at batch size 1; ":chat" applies the
tokenizer's chat template, few-shot examples as turns (a second lm-eval evaluation); ":sys" adds
``SYSTEM_INSTRUCTION`` (lm-eval's --system_instruction), ":single" turns --fewshot_as_multiturn off
(one evaluation per combination of these modes). Writes the per-request arguments
and responses and the aggregated metrics. Run with HF_HUB_OFFLINE=1 and
HF_DATASETS_OFFLINE=1: nothing may come from the network.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SYSTEM_INSTRUCTION = "Sei un assistente esperto di lingua italiana."

# lm-eval YAML of each (entry, prompt number); NER domains share one pattern.
YAMLS = {
    "wic": "_evalita-mp_wic_p{n}.yaml",
    "te": "_evalita-mp_te_p{n}.yaml",
    "sa": "_evalita-mp_sa_p{n}.yaml",
    "hs": "_evalita-mp_hs_p{n}.yaml",
    "faq": "_evalita-mp_faq_p{n}.yaml",
    "at": "_evalita-mp_at_task_p{n}.yaml",
    "ls": "_evalita-mp_ls_p{n}.yaml",
    "rel": "_evalita-mp_re_p{n}.yaml",
    "sum": "_evalita-mp_sum_fp-small_p{n}.yaml",
    "ner_adg": "_evalita-mp_ner_adg_p{n}.yaml",
    "ner_fic": "_evalita-mp_ner_fic_p{n}.yaml",
    "ner_wn": "_evalita-mp_ner_wn_p{n}.yaml",
}


def task_config(entry: str, prompt: str, k: str, data: Path, chat: bool = False) -> dict:
    import lm_eval
    from evalita_data.registry import get_task
    from lm_eval.tasks._yaml_loader import load_yaml

    folder = Path(lm_eval.__file__).parent / "tasks" / "evalita_llm"
    path = folder / YAMLS[entry].format(n=prompt.removeprefix("p"))
    if entry == "sum":
        # sum_utils loads HF evaluate's "rouge" script from the Hub at import: keep the
        # prompt and target, drop its scoring (SUM is not part of the model parity run).
        cfg = load_yaml(path, resolve_func=False)
        cfg.pop("process_results", None)
        cfg["metric_list"] = [{"metric": "exact_match"}]
    else:
        cfg = load_yaml(path)
    task_id, _, domain = entry.partition("_")
    spec = get_task(task_id)
    base = data / task_id / domain if domain else data / task_id
    files = {s: str(base / f"{s}.jsonl") for s in {spec.eval_split, spec.fewshot_split}}
    cfg.pop("tag", None)
    cfg.pop("dataset_name", None)
    cfg.pop("validation_split", None)
    cfg.update(
        task=f"parity_{entry}_{prompt}_{k}" + ("_chat" if chat else ""),
        num_fewshot=int(k),
        dataset_path="json",
        dataset_kwargs={"data_files": files},
        test_split=spec.eval_split,
        fewshot_split=spec.fewshot_split,
    )
    return cfg


def main(argv: list[str]) -> None:
    out, model, data, limit, max_gen, *pairs = argv
    from lm_eval import simple_evaluate

    dump = {}
    modes = lambda p: tuple(sorted(set(p.split(":")[3:])))  # noqa: E731
    for mode in dict.fromkeys(modes(p) for p in pairs):
        group = [p for p in pairs if modes(p) == mode]
        chat = "chat" in mode
        res = simple_evaluate(
            model="hf",
            model_args=f"pretrained={model},dtype=float32",
            tasks=[dict(task_config(*p.split(":")[:3], Path(data), chat), task="parity_" + p.replace(":", "_")) for p in group],
            batch_size=1,
            device="cpu",
            limit=int(limit),
            apply_chat_template=chat,
            fewshot_as_multiturn=chat and "single" not in mode,
            system_instruction=SYSTEM_INSTRUCTION if "sys" in mode else None,
            gen_kwargs={"max_gen_toks": int(max_gen)},
            log_samples=True,
        )
        for p in group:
            name = "parity_" + p.replace(":", "_")
            dump[p] = {
                "metrics": {k: v for k, v in res["results"][name].items() if isinstance(v, (int, float))},
                "samples": [
                    {"doc_id": s["doc_id"], "arguments": [list(a) for a in s["arguments"]], "resps": s["resps"]}
                    for s in sorted(res["samples"][name], key=lambda s: s["doc_id"])
                ],
            }
    Path(out).write_text(json.dumps(dump, ensure_ascii=False, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])

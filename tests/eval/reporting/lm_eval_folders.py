"""Hand-built lm-eval 0.4.13 output folders (``--log_samples``) for the reader's tests: the files lm-eval writes,
small enough to damage one key at a time (no lm-eval run needed)."""

from __future__ import annotations

import json
from pathlib import Path

from paths import TEST_DATA as DATA

STAMP = "2026-01-02T10-00-00.000001"
OLDER = "2025-12-01T09-00-00.000001"
WIC = "evalita-mp_wic_prompt-1"
NER = "evalita-mp_ner_adg_p1"
# wic p1 on the first three test documents (gold 0, 0, 1): predictions 0, 1, 1 -> accuracy and macro F1 2/3.
WIC_LLS = [(-0.2, -1.5), (-1.4, -0.3), (-2.0, -0.1)]
NER_ANSWERS = ["Mario Rossi$PER", "not an answer in the format", "&&NOENT&&"]


def wic_docs() -> list[dict]:
    lines = (DATA / "build" / "wic" / "test.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines[:3]]


def ner_docs() -> list[dict]:
    lines = (DATA / "build" / "ner" / "adg" / "test.jsonl").read_text("utf-8").splitlines()
    return [json.loads(line) for line in lines[:3]]


def wic_sample(doc_id: int, doc: dict, lls: tuple) -> dict:
    """One logged loglikelihood sample as lm-eval writes it: every response a string (utils.sanitize_list)."""
    context = f"Frase 1: {doc['sentence1']} Frase 2: {doc['sentence2']} Risposta:"
    return {"doc_id": doc_id, "doc": doc, "target": str(doc["label"]),
            "arguments": {f"gen_args_{i}": {"arg_0": context, "arg_1": f" {c}"} for i, c in enumerate(("No", "Sì"))},
            "resps": [[[str(ll), "False"]] for ll in lls], "filtered_resps": [[str(ll), "False"] for ll in lls],
            "filter": "none", "metrics": ["acc"], "doc_hash": f"hash-of-{doc['id']}", "prompt_hash": "p", "target_hash": "t"}


def ner_sample(doc_id: int, doc: dict, answer: str) -> dict:
    return {"doc_id": doc_id, "doc": doc, "target": "x", "arguments": {"gen_args_0": {"arg_0": f"Testo: {doc_id}", "arg_1": {}}},
            "resps": [[answer]], "filtered_resps": [answer], "filter": "none", "metrics": ["f1"], "doc_hash": f"h{doc_id}"}


def results_doc(tasks: list[str], model: str = "tiny", shots: int = 0, version: str = "0.4.13", **config) -> dict:
    return {"results": {t: {"alias": t, "acc,none": 0.5} for t in tasks}, "group_subtasks": {},
            "configs": {t: {"task": t} for t in tasks}, "n-shot": {t: shots for t in tasks},
            "config": {"model": "hf", "model_args": f"pretrained={model},dtype=float32", "device": "cpu", "limit": None,
                       "gen_kwargs": None, "random_seed": 0, **config},
            "model_name": model, "lm_eval_version": version, "transformers_version": "5.0.0", "chat_template": None}


def write_run(folder: Path, samples: dict[str, list[dict]], stamp: str = STAMP, **results) -> Path:
    """``folder``/tiny/results_<stamp>.json and samples_<task>_<stamp>.jsonl; the results file."""
    model = folder / "tiny"
    model.mkdir(parents=True, exist_ok=True)
    for task, records in samples.items():
        (model / f"samples_{task}_{stamp}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    path = model / f"results_{stamp}.json"
    path.write_text(json.dumps(results_doc(list(samples), **results)), "utf-8")
    return path


def clean_samples() -> dict[str, list[dict]]:
    return {WIC: [wic_sample(i, d, ll) for i, (d, ll) in enumerate(zip(wic_docs(), WIC_LLS))],
            NER: [ner_sample(i, d, a) for i, (d, a) in enumerate(zip(ner_docs(), NER_ANSWERS))]}

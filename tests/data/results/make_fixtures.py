"""Regenerate the fake results.json fixtures of tests/eval/reporting/test_report.py (seeded, deterministic).

    .venv/bin/python tests/data/results/make_fixtures.py

Three fake models (two share the basename 'alpha-7b'), tasks te (acc, 6 prompts),
hs (f1_macro + acc, 6 prompts) and ner (2 prompts, no samples files), in the
results.json format of `evalita-eval run` (docs/statistics.md).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).parent
MODELS = [
    ("alpha", {"name_or_path": "org-a/alpha-7b", "revision": "main", "dtype": "bfloat16"}, 0.70),
    ("beta", {"name_or_path": "org-b/beta-8b", "revision": "v1", "dtype": "bfloat16"}, 0.63),
    ("alpha2", {"name_or_path": "org-c/alpha-7b", "revision": "main", "dtype": "float16"}, 0.62),
]
MC_TASKS = {"te": 60, "hs": 80}  # task -> items
PROMPTS = [f"p{i}" for i in range(1, 7)]
PROMPT_SHIFT = {"p1": 0.0, "p2": 0.05, "p3": 0.12, "p4": 0.15, "p5": -0.12, "p6": -0.08}


def acc(samples: list[dict]) -> float:
    return sum(s["prediction"] == s["gold"] for s in samples) / len(samples)


def f1_macro(samples: list[dict]) -> float:
    f1s = []
    for c in (0, 1):
        tp = sum(s["prediction"] == c and s["gold"] == c for s in samples)
        fp = sum(s["prediction"] == c and s["gold"] != c for s in samples)
        fn = sum(s["prediction"] != c and s["gold"] == c for s in samples)
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return sum(f1s) / 2


def main() -> None:
    for folder, model, skill in MODELS:
        rng = random.Random(f"fixture-{folder}")
        results, timing, shas = {}, {}, {}
        (HERE / folder / "samples").mkdir(parents=True, exist_ok=True)
        for task, n in MC_TASKS.items():
            gold = [random.Random(f"gold-{task}-{i}").randrange(2) for i in range(n)]
            results[task] = {}
            for prompt in PROMPTS:
                p = min(0.97, max(0.3, skill + PROMPT_SHIFT[prompt] * (1.6 if folder == "alpha2" else 1 if folder == "alpha" else -0.15)))
                samples = [{"doc_id": i, "prediction": g if rng.random() < p else 1 - g, "gold": g}
                           for i, g in enumerate(gold)]
                with open(HERE / folder / "samples" / f"{task}_{prompt}.jsonl", "w", encoding="utf-8") as fh:
                    fh.writelines(json.dumps(s) + "\n" for s in samples)
                metrics = {"acc": acc(samples)} if task == "te" else {"f1_macro": f1_macro(samples), "acc": acc(samples)}
                results[task][prompt] = {**metrics, "n": n}
            timing[task] = round(rng.uniform(100, 900), 1)
            shas[task] = {"test": f"{task}-test-sha256-fixture"}
        results["ner"] = {p: {"ner_f1": round(rng.uniform(0.1, 0.5), 4), "ner_f1_strict": round(rng.uniform(0.05, 0.4), 4),
                              "n": 40} for p in ("p1", "p2")}
        timing["ner"] = 1234.5
        shas["ner"] = {"test": "ner-test-sha256-fixture"}
        doc = {
            "model": model,
            "data": {"source": "build", "manifest_sha256": shas},
            "config": {"num_fewshot": 0, "limit": None, "batch_size": 8, "apply_chat_template": False, "seed": 1234,
                       "device": "cpu"},
            "results": results,
            "versions": {"evalita_eval": "0.1.0"},
            "timing": timing,
        }
        (HERE / folder / "results.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

"""Every Eval Ever's vocabulary, as its own lm-eval converter writes it, so that our exports join theirs
(docs/push-results.md, "Every Eval Ever"): ``metric_id`` as ``every_eval_ever/converters/common/metrics.py`` of the
``every-eval-ever`` 0.3.0 package (registry revision below), ``sample_hash`` as its
``converters/lm_eval/instance_level_adapter.py`` computes it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

METRIC_ID_REGISTRY_REVISION = "8b83e9c"
HARNESS_NAMESPACE = "lm-evaluation-harness"
OUR_NAMESPACE = "evalita-eval"  # the CPS: no harness reports it

CANONICAL_METRIC_IDS = {"acc": "accuracy", "accuracy": "accuracy", "bleu": "bleu", "f1": "f1", "f1_score": "f1",
                        "em": "exact-match", "exact_match": "exact-match", "precision": "precision", "recall": "recall",
                        "rouge1": "rouge-1", "rouge2": "rouge-2", "rougeL": "rouge-l", "rouge_l": "rouge-l"}
# lm-eval's own evalita_llm tasks (0.4.13) report as "f1" the metric of ours named here (tests/eval/test_eval_metrics.py
# checks each against lm-eval's function); export-eee writes it under that id too (docs/push-results.md).
LM_EVAL_OWN_F1 = {"wic": "f1_binary", "hs": "f1_binary", "sa": "sentipolc_f1", "ls": "ls_f1", "ner": "ner_f1",
                  "rel": "rel_f1"}
METRIC_KINDS = {"acc": "accuracy", "acc_norm": "accuracy", "accuracy": "accuracy", "f1": "f1",
                **dict.fromkeys(("rouge1", "rouge2", "rougeL", "rougeLsum"), "text_overlap")}

# results.json's model.backend -> inference_platform, deployment_type and the engine (name, the package whose version
# results.json records; a served model's is not known). A backend not listed (another package's; none recorded: an
# older run, of hf) is taken as run here on a Hub model.
BACKENDS: dict[str, tuple[str, str, tuple[str, str] | None]] = {
    "hf": ("huggingface", "self_deployed", ("transformers", "transformers")),
    "vllm": ("huggingface", "self_deployed", ("vllm", "vllm")),
    "openai-chat": ("openai_compatible_api", "externally_managed", None),
    "openai-completions": ("openai_compatible_api", "externally_managed", None),
}


def metric_id(name: str, namespace: str = HARNESS_NAMESPACE) -> str:
    """The id EEE joins on: the registry's slug, else ``<namespace>.<name>``."""
    return CANONICAL_METRIC_IDS.get(name) or f"{namespace}.{name}"


def metric_config(name: str, description: str, namespace: str = HARNESS_NAMESPACE) -> dict:
    """A ``metric_config`` as EEE's lm-eval converter writes one for a metric on [0, 1], higher better."""
    details = {"metric_id_registry_revision": METRIC_ID_REGISTRY_REVISION}
    if name not in CANONICAL_METRIC_IDS:
        details["metric_id_status"] = "unregistered"
    config = {"evaluation_description": description, "metric_id": metric_id(name, namespace), "metric_name": name,
              "metric_unit": "proportion", "lower_is_better": False, "score_type": "continuous",
              "min_score": 0, "max_score": 1, "additional_details": details}
    if name in METRIC_KINDS:
        config["metric_kind"] = METRIC_KINDS[name]
    return config


def sample_hash(prompt: str, reference: object) -> str:
    """EEE's lm-eval converter's ``sample_hash``: the same item and prompt hash alike in both exports."""
    blob = json.dumps({"raw": prompt, "reference": str(reference)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def deployment(backend: str | None, versions: dict, local: bool) -> tuple[str, str, dict | None]:
    """``inference_platform``, ``deployment_type`` and ``inference_engine`` (``{name, version}``, None where not
    known) of a run on ``backend``; ``local``: the weights are a local folder (``inference_platform: local`` unless
    served)."""
    platform, deployed, engine = BACKENDS.get(str(backend), ("huggingface", "self_deployed", None))
    platform = "local" if local and deployed == "self_deployed" else platform
    if engine is None:
        return platform, deployed, None
    version = versions.get(engine[1])
    return platform, deployed, {"name": engine[0], **({"version": str(version)} if version else {})}


def item_score(metric: Any, sample: dict) -> float:
    """One item's score on ``metric`` (an ``evalita_data`` Metric), the number EEE reads ``is_correct`` from
    (``== 1``): a hit metric's own 0/1 for the item; for a corpus metric (an F1, a ROUGE) a scored choice's
    correctness (prediction == gold), else the metric over this item alone."""
    from evalita_data.scoring.metric import HITS

    if metric.kind == HITS:
        return float(metric.sample(sample))
    if "choices" in sample and isinstance(sample.get("prediction"), int):
        return float(sample["prediction"] == sample.get("gold"))
    return float(metric([sample]))

"""The metrics the generative settings add (``ROUGE_L_ANSWER``...) and the lookup of a metric by name: no table of
names, ``metric_of`` reads the ``Metric`` objects a task's ``TaskSpec`` lists (an added task's too), so ``report``
recomputes any declared metric from the samples for its bootstrap."""

from __future__ import annotations

import re
from typing import Sequence

from evalita_data.registry import task_of_entry, tasks
from evalita_data.scoring.metric import Metric
from evalita_data.scoring.metrics import rouge_metric
from evalita_data.taskspec import TaskSpec

from .settings.answers import normalize

# Open-ended answers of MC tasks (eval/settings/instruct.py): generation vs the gold answer text.
# Accents folded first (answers.normalize): rouge-score's tokenizer drops non-ASCII letters ("Sì" -> "s").
ROUGE_L_ANSWER = rouge_metric("rougeL", "rougeL_answer", "gold_answer", normalize)


def format_failures(spec: TaskSpec, generations: Sequence[str]) -> int | None:
    """``unparsed``: the generations outside the task's answer format (its constraint's regex); None without one."""
    if spec.output_pattern is None:
        return None
    compiled = re.compile(spec.output_pattern)
    return sum(compiled.fullmatch(g) is None for g in generations)


def corpus_bleu(pairs: list[tuple[str, str]]) -> float:
    """sacrebleu's corpus BLEU (its defaults: 13a tokenizer, exponential smoothing) of (answer, reference)
    pairs, one reference each, divided by 100 as the other scores (reports show percent)."""
    import sacrebleu

    if not pairs:
        return 0.0
    answers, references = zip(*pairs)
    return sacrebleu.corpus_bleu(list(answers), [list(references)]).score / 100


# The closed-ended study's (Musacchio et al.) text metrics of OE and CE-NI beside ROUGE-L: corpus BLEU, and BERTScore
# F1, the mean of each sample's ``bertscore_f1`` (running/bertscore.py; without --bertscore-model absent, never zero).
BLEU_ANSWER = Metric("bleu_answer", lambda s: (s["generation"], s["gold_answer"]), corpus_bleu,
                     description="corpus BLEU (sacrebleu, 13a) of the answers against the gold answer texts, / 100")
BERTSCORE_F1 = Metric("bertscore_f1", lambda s: float(s["bertscore_f1"]), lambda xs: sum(xs) / len(xs) if xs else 0.0,
                      description="mean BERTScore F1 of the answers against the gold answer texts (--bertscore-model)")
# Metrics the evaluator adds to a task's own in the generative settings.
SETTING_METRICS = (ROUGE_L_ANSWER, BLEU_ANSWER, BERTSCORE_F1)


def metric_of(task: str | None, name: str) -> Metric:
    """The metric ``name`` as task (or evaluation entry, ``ner_adg``) ``task`` declares it; ``task`` None: the one
    metric of that name over every registered task (two different declarations of one name: a KeyError naming them)."""
    for m in SETTING_METRICS:
        if m.name == name:
            return m
    if task is not None:
        spec = task_of_entry(task.split(" [", 1)[0])  # a report table's "te [ce]" is task te
        if spec is None:
            raise KeyError(f"unknown task {task!r}: no registered task declares it (is EVALITA_TASK_PATH set as for "
                           "the run?)")
        for m in spec.metrics:
            if m.name == name:
                return m
        raise KeyError(f"task {spec.id} declares no metric {name!r}; it declares {', '.join(spec.metric_names())}")
    found = {spec.id: m for spec in tasks().values() for m in spec.metrics if m.name == name}
    if not found:
        raise KeyError(f"unknown metric {name!r}: no registered task declares it")
    if len(set(found.values())) > 1:
        raise KeyError(f"metric {name!r} is declared differently by tasks {', '.join(found)}; name the task")
    return next(iter(found.values()))


def higher_is_better(task: str, name: str) -> bool:
    """The declared direction of metric ``name`` of ``task``; higher for a metric no registered
    task declares (results of a task not installed here)."""
    try:
        return metric_of(task, name).higher_is_better
    except KeyError:
        return True


def score_samples(metric: str, samples: list[dict], task: str | None = None) -> float:
    """The corpus-level ``metric`` (a name: ``metric_of``) over ``samples`` (the dicts of samples/*.jsonl)."""
    return metric_of(task, metric)(samples)

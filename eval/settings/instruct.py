"""Evaluation settings of the multiple-choice tasks (``--setting``: ``loglikelihood``, ``ce``, ``ce-ni``, ``oe``;
docs/settings.md, "The settings"). Each setting's two prompts are built from the registry's ``TaskSpec.instruct``,
compiled as ordinary ``MCPrompt`` s; each generative setting is declared once, as an ``InstructSetting``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Callable, Sequence

from evalita_data.prompts import CompiledTask, compile_task
from evalita_data.registry import get_task
from evalita_data.taskspec import InstructPrompts, MCPrompt, Metric, TaskSpec

from .answers import match_option_rule, parse_letter_rule
from ..metrics import BLEU_ANSWER, ROUGE_L_ANSWER

SETTINGS = ("loglikelihood", "ce", "ce-ni", "oe")
LETTERS = "ABCDEFGHIJ"
# What the model is asked to write, per setting (OE: the task's own ``oe_hint``).
CE_REQUEST = "Rispondi solo con la lettera della risposta corretta."
CENI_REQUEST = "Rispondi riportando solo il testo della risposta corretta."
ANSWER_CUE = "\nRisposta:"
STOP = ("\n\n",)
UNPARSED = "unparsed"  # per-prompt count of unparseable answers in results.json


@dataclass(frozen=True)
class InstructSetting:
    """What one generative setting declares: how the options are shown and labelled, what the model
    is asked to write, how long it may write, how its answer is read and the metrics it adds."""

    name: str
    max_new_tokens: int  # a letter is short; an answer text may be a sentence (FAQ, AT)
    options_block: Callable[[str], str]  # the answers expression -> the template listing the options
    choices: Callable[[str], str]  # the answers expression -> the choices expression (what the model writes)
    request: Callable[[InstructPrompts], str]
    # (generation, choices, the texts behind the choices or None) -> (the choice read or None, the rule or why not)
    read: Callable[[str, Sequence[str], Sequence[str] | None], tuple[int | None, str]]
    extra_metrics: tuple[Metric, ...] = ()


def _read_option(generation: str, choices: Sequence[str],
                 _option_texts: Sequence[str] | None) -> tuple[int | None, str]:
    return match_option_rule(generation, choices)


CLOSED_ENDED = InstructSetting(  # options after letters A, B, ...; the model writes the letter
    "ce", 16,
    options_block=lambda answers: "{% for a in " + answers + " %}\n{{ '" + LETTERS + "'[loop.index0] }}: "
                                                                                     "{{ a }}{% endfor %}",
    choices=lambda answers: "['" + "', '".join(LETTERS) + "'][:(" + answers + ")|length]",
    request=lambda _ins: CE_REQUEST, read=parse_letter_rule)
CLOSED_ENDED_NO_IDS = InstructSetting(  # options listed bare; the model writes the option's text
    "ce-ni", 256,
    options_block=lambda answers: "\nOpzioni:{% for a in " + answers + " %}\n{{ a }}{% endfor %}",
    choices=lambda answers: answers, request=lambda _ins: CENI_REQUEST, read=_read_option,
    extra_metrics=(ROUGE_L_ANSWER, BLEU_ANSWER))
OPEN_ENDED = InstructSetting(  # no options shown; the answer also scored by ROUGE-L against the gold text
    "oe", 256, options_block=lambda _answers: "", choices=lambda answers: answers,
    request=lambda ins: ins.oe_hint, read=_read_option, extra_metrics=(ROUGE_L_ANSWER, BLEU_ANSWER))
INSTRUCT_SETTINGS = {s.name: s for s in (CLOSED_ENDED, CLOSED_ENDED_NO_IDS, OPEN_ENDED)}


def instruct_setting(name: str) -> InstructSetting:
    """The declaration of the generative setting ``name`` (ce, ce-ni, oe); a ValueError for another name."""
    if name not in INSTRUCT_SETTINGS:
        raise ValueError(f"unknown generative setting {name!r}; known: {', '.join(INSTRUCT_SETTINGS)}")
    return INSTRUCT_SETTINGS[name]


@lru_cache(maxsize=None)
def setting_task(task_id: str, setting: str) -> CompiledTask:
    """The task with the two prompts (p1, p2) of ``setting`` in place of its log-likelihood prompts."""
    spec = get_task(task_id)
    ins = spec.instruct
    if ins is None:
        raise ValueError(f"task {spec.id} declares no instruct prompts (TaskSpec.instruct): --setting {setting} needs "
                         "them")
    declared = instruct_setting(setting)
    answers = repr(list(ins.answers)) if isinstance(ins.answers, list) else ins.answers
    body = ins.question + declared.options_block(answers) + "\n" + declared.request(ins) + ANSWER_CUE
    choices = declared.choices(answers)
    return compile_task(replace(spec, prompts=[MCPrompt("p1", body, choices),
                                               MCPrompt("p2", ins.description + body, choices)]))


def parse_answer_rule(setting: str, generation: str, choices: Sequence[str],
                      option_texts: Sequence[str] | None = None) -> tuple[int | None, str]:
    """(index of the choice the generation gives, the answer rule that read it), or (None, why it is unparsed);
    ``option_texts``: in CE, the texts behind the letters (a letter given with another option's text contradicts)."""
    return instruct_setting(setting).read(generation, choices, option_texts)


def reading_fields(parsed: int | None, rule: str) -> dict[str, str | None]:
    """A sample's record of how its answer was read: ``parsed_by`` (the rule) or ``unparsed_reason``."""
    return {"parsed_by": rule if parsed is not None else None, "unparsed_reason": None if parsed is not None else rule}


def rule_counts(samples: Sequence[dict]) -> dict[str, int]:
    """How many answers each rule parsed (``parsed_by`` of the samples), and how many none did, per reason
    (``unparsed: echo``; ``unparsed`` for samples recorded without one). The counts sum to the samples'."""
    counts: dict[str, int] = {}
    for s in samples:
        reason = s.get("unparsed_reason")
        rule = s.get("parsed_by") or (f"{UNPARSED}: {reason}" if reason else UNPARSED)
        counts[rule] = counts.get(rule, 0) + 1
    return dict(sorted(counts.items()))


def scored_prediction(parsed: int | None, gold: int, n_choices: int, unparsed_as: Sequence[int] | None = None) -> int:
    """The class an answer counts as: the parsed one, or for an unparseable answer a wrong one: the class the task
    declares for the gold one (``InstructPrompts.unparsed_as``), else the other class of a binary task, otherwise -1
    (docs/settings.md, "Scores and unparseable answers")."""
    if parsed is not None:
        return parsed
    if unparsed_as is not None:
        return unparsed_as[gold]
    if n_choices == 2:
        return 1 - gold
    return -1


def setting_metrics(spec: TaskSpec, setting: str, added: Sequence[Metric] = ()) -> list[Metric]:
    """The task's metrics computable from generated answers; OE and CE-NI add ROUGE-L and BLEU against the
    gold answer text, and ``added`` (BERTScore F1, when a scorer model was given) where they do."""
    metrics = [m for m in spec.metrics if not m.needs_loglikelihoods]
    extra = list(instruct_setting(setting).extra_metrics)
    return metrics + extra + (list(added) if extra else [])


def setting_scores(spec: TaskSpec, setting: str, samples: list[dict], added: Sequence[Metric] = ()) -> dict[str, float]:
    """The prompt's scores on generated answers, and how many answers no rule could parse."""
    scores: dict[str, float] = {m.name: m(samples) for m in setting_metrics(spec, setting, added)}
    scores[UNPARSED] = sum(s["parsed"] is None for s in samples)
    return scores

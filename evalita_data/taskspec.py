"""The declaration of one benchmark task, read by the builder, the cards and the evaluator."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable, Iterator, Literal, Union

from .report import ConversionReport
from .rawsource import RawSource

# A converter is a pure function of the raw folder: it yields (split, record) pairs
# in a stable order and reports every dropped or repaired record.
Converter = Callable[[RawSource, ConversionReport, int], Iterator[tuple[str, dict]]]
# Checks that JSON Schema cannot express; returns problems as "field: problem".
RecordCheck = Callable[[dict], list[str]]


@dataclass(frozen=True)
class MCPrompt:
    """A multiple-choice prompt: a Jinja template and its choices.

    ``choices`` is a fixed list, or a Jinja expression over the record that yields
    the list (FAQ and AT list the option texts themselves).
    """

    name: str
    template: str
    choices: Union[list[str], str]


@dataclass(frozen=True)
class GenPrompt:
    """A generative prompt: a Jinja template; the model continues it greedily."""

    name: str
    template: str


Prompt = Union[MCPrompt, GenPrompt]


@dataclass(frozen=True)
class HubSplits:
    """Where the official Evalita-LLM copy of a task is on the Hub (``<org>/<dataset>``),
    as lm-eval's ``evalita_llm`` tasks read it: its split names differ from ours."""

    dataset: str
    test: str = "test"
    fewshot: str = "dev"
    # None: the entry's own config (NER domains), else the repository's default config.
    config: str | None = None


@dataclass(frozen=True)
class TaskSpec:
    id: str
    title: str
    # Provenance, for the README of raw/<task>/ and the dataset card.
    source: str
    license: str
    citation: str
    homepage: str
    raw_files: list[str]
    # Where to get the originals when they are not in raw/<task>/.
    obtain_hint: str
    # "module:function" below evalita_data.converters; None = not written yet.
    converter: str | None
    schema: str
    # Split -> rows in the paper; NER keys are "<config>/<split>".
    paper_splits: dict[str, int]
    id_field: str | None
    output_type: Literal["multiple_choice", "generate_until"]
    # MC: a Jinja expression giving the index of the gold choice; generative: a Jinja
    # template giving the reference text (the answer of few-shot examples).
    target: str
    prompts: list[Prompt]
    metrics: list[str]
    eval_split: str
    fewshot_split: str
    configs: list[str] = field(default_factory=list)
    # Extra Jinja variables computed from the record before rendering (e.g. WiC w1).
    derived: dict[str, str] = field(default_factory=dict)
    stop: list[str] = field(default_factory=list)
    max_new_tokens: int = 256
    record_check: RecordCheck | None = None
    seed: int = 0
    task_categories: list[str] = field(default_factory=list)
    # The official published copy (evalitahf/*), read by `evalita-eval run --data hf:ORG`.
    hub_splits: HubSplits | None = None

    def load_converter(self) -> Converter | None:
        if self.converter is None:
            return None
        module, func = self.converter.split(":")
        return getattr(importlib.import_module(f"evalita_data.converters.{module}"), func)

    def prompt(self, name: str) -> Prompt:
        for p in self.prompts:
            if p.name == name:
                return p
        raise KeyError(f"task {self.id} has no prompt {name!r}; it has {[p.name for p in self.prompts]}")


def six_mc_prompts(
    *,
    description: str,
    question: str,
    question_choices: Union[list[str], str],
    answers: str,
    letter_choices: list[str],
    affirmative: str,
    affirmative_choices: Union[list[str], str],
    p3_question: str | None = None,
    p4_description: str | None = None,
    p4_answers: str | None = None,
) -> list[MCPrompt]:
    """The paper's six MC prompts as compositions of the four parts.

    p1 question; p2 description + question; p3 question + lettered answers;
    p4 description + question + answers; p5 affirmative; p6 description + affirmative.
    The overrides cover the few tasks whose p3/p4 deviate (WiC, HS, FAQ, AT).
    """
    q3 = p3_question if p3_question is not None else question
    d4 = p4_description if p4_description is not None else description
    a4 = p4_answers if p4_answers is not None else answers
    q4 = p3_question if p3_question is not None else question
    return [
        MCPrompt("p1", question, question_choices),
        MCPrompt("p2", description + question, question_choices),
        MCPrompt("p3", q3 + answers, letter_choices),
        MCPrompt("p4", d4 + q4 + a4, letter_choices),
        MCPrompt("p5", affirmative, affirmative_choices),
        MCPrompt("p6", description + affirmative, affirmative_choices),
    ]


def two_gen_prompts(description: str, instruction: str) -> list[GenPrompt]:
    return [GenPrompt("p1", instruction), GenPrompt("p2", description + instruction)]

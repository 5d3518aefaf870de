"""The declaration of one benchmark task, read by the builder, the cards, the evaluator and the report.

A task is a module that defines ``TASK`` (one ``TaskSpec``) or ``TASKS`` (several, e.g.
a multiple-choice and a generative variant of one dataset); ``evalita_data.registry``
discovers them (see docs/adding-a-task.md).
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator, Literal, Union

from .building.conversion_report import ConversionReport
from .building.rawsource import RawSource
from .scoring.metric import Metric

__all__ = ["Converter", "GenPrompt", "HubSplits", "InstructPrompts", "MCPrompt", "Metric", "Prompt", "RecordCheck",
           "TaskSpec", "FOLDER_PACKAGE_PREFIX", "load_schema", "schema_file", "six_mc_prompts", "two_gen_prompts"]

# A converter is a pure function of the raw folder: it yields (split, record) pairs
# in a stable order and reports every dropped or repaired record.
Converter = Callable[[RawSource, ConversionReport, int], Iterator[tuple[str, dict]]]
# Checks that JSON Schema cannot express; returns problems as "field: problem".
RecordCheck = Callable[[dict], list[str]]
# The registry imports the modules of an EVALITA_TASK_PATH folder into a package named this
# prefix + a hash of the folder's path.
FOLDER_PACKAGE_PREFIX = "_evalita_tasks_"


def schema_file(schema: Union[str, Path]) -> Path:
    """The JSON Schema file of a schema name (``schemas/<name>.schema.json``) or path."""
    if isinstance(schema, Path):
        return schema
    from importlib import resources

    return Path(str(resources.files("evalita_data.schemas").joinpath(f"{schema}.schema.json")))


@lru_cache(maxsize=None)
def load_schema(name: Union[str, Path]) -> dict:
    """A task's schema by name (``schemas/<name>.schema.json``) or path (``TaskSpec.schema``)."""
    return json.loads(schema_file(name).read_text("utf-8"))


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
class InstructPrompts:
    """What the generative settings (CE, CE-NI, OE; eval/settings/instruct.py) of a multiple-choice task need.

    ``question`` is the question without its options; ``answers`` are the answer texts in
    the order of the task's target index (a fixed list or a Jinja expression, as
    ``MCPrompt.choices``): CE lists them after letters A, B, ..., CE-NI lists them bare, OE
    does not show them (they are what an open answer is matched against; the gold one is
    the OE reference). ``description`` opens the second prompt of every setting; ``oe_hint``
    tells the model the expected form of an open answer.
    """

    question: str
    answers: Union[list[str], str]
    description: str
    oe_hint: str = "Rispondi in modo breve."
    # The class an answer no rule can parse counts as, indexed by the gold class (SENTIPOLC:
    # both polarity axes flipped). None: the other class of a two-choice item, else no class
    # (every metric counts it wrong).
    unparsed_as: tuple[int, ...] | None = None


@dataclass(frozen=True)
class HubSplits:
    """Where the official Evalita-LLM copy of a task is on the Hub (``<org>/<dataset>``),
    as lm-eval's ``evalita_llm`` tasks read it: its split names differ from ours."""

    dataset: str
    test: str = "test"
    fewshot: str = "dev"
    # None: the entry's own config (NER domains), else the repository's default config.
    config: str | None = None
    # The official few-shot split is not a split of ours under another name (REL: their `dev` is
    # not our `trial`; SUM: their `dev` is not our `train`): why. `evalita-data push --layout
    # official` then writes no such split and says so; reading the official copy (`--data hf:`)
    # still takes its few-shot examples from it. None: our few-shot split, renamed.
    fewshot_not_ours: str | None = None


@dataclass(frozen=True)
class TaskSpec:
    id: str
    title: str
    # Provenance, for the README of raw/<task>/ and the dataset card.
    source: str
    license: str
    citation: str
    homepage: str
    # Where to get the originals when they are not in raw/<task>/ (converters' MissingSource
    # and the build report use it unless they name a more precise hint).
    obtain_hint: str
    # The converter: "module:function" below evalita_data.converters, or the function itself
    # (tasks outside the package); None = not written yet.
    converter: Union[str, Converter, None]
    # A schema name (schemas/<name>.schema.json) or the path of a schema file.
    schema: Union[str, Path]
    # Split -> rows in the paper; tasks with configs key them "<config>/<split>".
    paper_splits: dict[str, int]
    id_field: str | None
    output_type: Literal["multiple_choice", "generate_until"]
    # MC: a Jinja expression giving the index of the gold choice; generative: a Jinja
    # template giving the reference text (the answer of few-shot examples).
    target: str
    prompts: list[Prompt]
    # The metrics of the evaluation; the first is the headline metric of the report.
    metrics: list[Metric]
    eval_split: str
    fewshot_split: str
    # Generative tasks: the record field the metrics compare the generation with.
    gold_field: str | None = None
    # Configs (e.g. NER domains) are evaluated as separate entries "<id>_<config>".
    configs: list[str] = field(default_factory=list)
    # Extra Jinja variables computed from the record before rendering (e.g. WiC w1).
    derived: dict[str, str] = field(default_factory=dict)
    stop: list[str] = field(default_factory=list)
    max_new_tokens: int = 256
    record_check: RecordCheck | None = None
    seed: int = 0
    task_categories: list[str] = field(default_factory=list)
    # Position in listings (build, evaluation and report order: the paper's table order).
    order: int = 1000
    # The folder under raw/ holding the originals; "" = the task id. Variants of one
    # dataset (an MC and a generative task) share it.
    raw_folder: str = ""
    # Multiple-choice tasks: the prompts of the instruct settings (--setting ce|ce-ni|oe).
    instruct: InstructPrompts | None = None
    # The official published copy (evalitahf/*), read by `evalita-eval run --data hf:ORG`.
    hub_splits: HubSplits | None = None
    # `evalita-data fetch`: the function that downloads the originals into the task's folder under
    # the raw root, called as fn(raw_root, revision=, force=, echo=), or "module:function" below
    # evalita_data (built-ins); None: they are obtained by hand (obtain_hint).
    fetcher: Union[str, Callable[..., Path], None] = None
    # Generative tasks: the answer format, a regular expression every whole answer must match
    # (``re.fullmatch``), written in the subset Python's ``re``, xgrammar and vLLM share
    # (literals, classes, groups, alternation, ``? * + {m,n}``). ``--constrained`` decodes
    # under it; results.json counts the answers outside it (``unparsed``). None: free text.
    output_pattern: str | None = None
    # The closing rule ``--constrained`` needs to end an answer within its token budget:
    # complete answers ("x" standing for any piece character, e.g. NER "x$PER"). Every suffix
    # of each is a way to finish an answer begun; the last as many tokens as the longest of
    # them takes are reserved, and there the shortest suffix the format accepts is forced.
    output_closings: tuple[str, ...] = ()
    # The answer that means "nothing to report" (NER &&NOENT&&), when the format has one: its
    # suffixes also close an answer, but it is not counted in the reserved tokens.
    output_empty: str = ""
    # Raised when the task changes in a way that can change a number (records, target, metrics,
    # stop rule); recorded per task in results.json (``task_versions``), with a hash of each prompt.
    version: int = 1

    @property
    def converter_name(self) -> str:
        """How cards name the converter: ``module:function`` (built-ins: below
        ``evalita_data.converters``), never a repr with an address; "" when there is none."""
        if self.converter is None:
            return ""
        if isinstance(self.converter, str):
            return self.converter
        module = getattr(self.converter, "__module__", None) or "?"
        # A module of an EVALITA_TASK_PATH folder lives in a package named after the folder's
        # absolute path: its file name alone, the same wherever the folder is.
        if module.startswith(FOLDER_PACKAGE_PREFIX):
            module = module.split(".", 1)[-1]
        return f"{module}:{getattr(self.converter, '__qualname__', type(self.converter).__qualname__)}"

    def load_converter(self) -> Converter | None:
        if self.converter is None or callable(self.converter):
            return self.converter
        module, func = self.converter.split(":")
        return getattr(importlib.import_module(f"evalita_data.converters.{module}"), func)

    def load_fetcher(self) -> Callable[..., Path] | None:
        if self.fetcher is None or callable(self.fetcher):
            return self.fetcher
        module, func = self.fetcher.split(":")
        return getattr(importlib.import_module(f"evalita_data.{module}"), func)

    def schema_path(self) -> Path:
        return schema_file(self.schema)

    @property
    def schema_label(self) -> str:
        """How messages and cards name the schema: ``schemas/<name>.schema.json`` or the file's name."""
        return f"schemas/{self.schema}.schema.json" if isinstance(self.schema, str) else self.schema.name

    @property
    def raw_dir(self) -> str:
        return self.raw_folder or self.id

    def entry_name(self, config: str | None) -> str:
        """The evaluation entry of one config: ``ner_adg``; the task id when there are no configs."""
        return f"{self.id}_{config}" if config else self.id

    def entries(self) -> list[tuple[str, str | None]]:
        """(entry name, config) of every evaluation entry of this task."""
        return [(self.entry_name(c), c) for c in self.configs] or [(self.id, None)]

    def split_names(self) -> set[str]:
        """The split names of ``paper_splits`` (without their config prefix)."""
        return {key.rsplit("/", 1)[-1] for key in self.paper_splits}

    def metric_names(self) -> list[str]:
        return [m.name for m in self.metrics]

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

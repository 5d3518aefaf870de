"""Rendering of the registry's prompts, choices and targets (no torch: the cards use it too).

Templates run in a sandboxed Jinja environment with ``StrictUndefined``; every
variable a template uses is checked against the task's schema properties and
derived variables when the task is compiled, so a typo fails once, at load time,
never halfway through an evaluation.

Conventions (see ``TaskSpec``): ``MCPrompt.choices`` is a fixed list or a Jinja
*expression* yielding a list; a multiple-choice ``target`` is an expression
yielding the gold index; a generative ``target`` is a *template* yielding the
reference answer (used as the answer of few-shot examples).

A registered task's compiled form, by id, is ``evalita_data.registry.compiled``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from jinja2 import StrictUndefined, meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .taskspec import MCPrompt, TaskSpec, load_schema

# keep_trailing_newline as lm-evaluation-harness renders doc_to_text.
_ENV = ImmutableSandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True)


class PromptError(ValueError):
    """A template that cannot be rendered for a task (unknown variable, bad syntax, bad value)."""


def schema_fields(spec: TaskSpec) -> set[str]:
    return set(load_schema(spec.schema).get("properties", {}))


def _check_names(spec: TaskSpec, what: str, source: str, allowed: set[str]) -> None:
    try:
        used = meta.find_undeclared_variables(_ENV.parse(source))
    except Exception as err:  # jinja2.TemplateSyntaxError and friends
        raise PromptError(f"task {spec.id}, {what}: invalid Jinja ({err}): {source!r}") from None
    unknown = sorted(used - allowed)
    if unknown:
        raise PromptError(
            f"task {spec.id}, {what}: uses {', '.join(unknown)}, which the record does not have (fields of "
            f"{spec.schema_label} and derived: {', '.join(sorted(allowed))})"
        )


@dataclass(frozen=True)
class CompiledPrompt:
    task: str
    name: str
    multiple_choice: bool
    text: Callable[[dict], str]
    choices: Callable[[dict], list[str]] | None


@dataclass(frozen=True)
class CompiledTask:
    spec: TaskSpec
    derived: dict[str, Callable[..., Any]]
    target_fn: Callable[[dict], Any]
    prompts: dict[str, CompiledPrompt]

    def variables(self, record: dict) -> dict:
        """The record plus its derived variables (e.g. WiC w1, w2)."""
        env = dict(record)
        for name, fn in self.derived.items():
            env[name] = fn(**record)
        return env

    def target(self, record: dict) -> Any:
        """MC: gold choice index (int); generative: reference answer text."""
        return self.target_fn(self.variables(record))

    def render(self, prompt: str, record: dict) -> str:
        return self.prompts[prompt].text(self.variables(record))

    def choices(self, prompt: str, record: dict) -> list[str]:
        fn = self.prompts[prompt].choices
        if fn is None:
            raise PromptError(f"task {self.spec.id} prompt {prompt} is generative: it has no choices")
        return fn(self.variables(record))

    def fewshot_answer(self, prompt: str, record: dict) -> str:
        """The answer shown after a few-shot example: the gold choice, or the reference text."""
        gold = self.target(record)
        if self.prompts[prompt].multiple_choice:
            return self.choices(prompt, record)[gold]
        return gold


def _expression(spec: TaskSpec, what: str, source: str, allowed: set[str]) -> Callable[..., Any]:
    _check_names(spec, what, "{{ " + source + " }}", allowed)
    try:
        return _ENV.compile_expression(source, undefined_to_none=False)
    except Exception as err:
        raise PromptError(f"task {spec.id}, {what}: invalid Jinja expression ({err}): {source!r}") from None


def _template(spec: TaskSpec, what: str, source: str, allowed: set[str]) -> Callable[[dict], str]:
    _check_names(spec, what, source, allowed)
    tmpl = _ENV.from_string(source)
    return lambda env: tmpl.render(env)


def _choices_fn(spec: TaskSpec, p: MCPrompt, allowed: set[str]) -> Callable[[dict], list[str]]:
    if isinstance(p.choices, list):
        fixed = list(p.choices)
        return lambda _env: list(fixed)
    expr = _expression(spec, f"prompt {p.name} choices", p.choices, allowed)

    def choices(env: dict) -> list[str]:
        value = expr(**env)
        if not isinstance(value, (list, tuple)) or not all(isinstance(c, str) for c in value):
            raise PromptError(f"task {spec.id} prompt {p.name}: choices {p.choices!r} gave {value!r}, not a list of "
                              "strings")
        return list(value)

    return choices


def compile_task(spec: TaskSpec) -> CompiledTask:
    """Compile and check every template of ``spec``; raises PromptError on the first problem."""
    fields = schema_fields(spec)
    derived = {name: _expression(spec, f"derived {name}", src, fields) for name, src in spec.derived.items()}
    allowed = fields | set(derived)
    mc = spec.output_type == "multiple_choice"
    if mc:
        expr = _expression(spec, "target", spec.target, allowed)
        target_fn: Callable[[dict], Any] = lambda env: expr(**env)  # noqa: E731
    else:
        target_fn = _template(spec, "target", spec.target, allowed)
    prompts = {}
    for p in spec.prompts:
        text = _template(spec, f"prompt {p.name}", p.template, allowed)
        if mc != isinstance(p, MCPrompt):
            raise PromptError(f"task {spec.id} is {spec.output_type} but prompt {p.name} is a {type(p).__name__}")
        choices = _choices_fn(spec, p, allowed) if isinstance(p, MCPrompt) else None
        prompts[p.name] = CompiledPrompt(spec.id, p.name, mc, text, choices)
    return CompiledTask(spec, derived, target_fn, prompts)

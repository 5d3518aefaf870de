"""The one type of a run's options (``RunSpec``, docs/evaluator.md): ``run``'s options (eval/cli/run.py derives them),
a ``--config FILE`` mapping (the command line overrides it, as lm-eval's) and each run of a sweep file. Every value and
rule between values is checked here, once; each error one line naming the file (and run of a sweep), key and what was
expected."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from .backend_support.options import expected
from .config_file import load_file, short
from .settings.instruct import SETTINGS
from .settings.thinking import DEFAULT_MARKERS, Thinking

DTYPES = ("auto", "float32", "float16", "bfloat16")
# The engine flags that aliased --backend-arg NAME=VALUE, removed: flag -> NAME (one line names the spelling).
REMOVED_FLAGS = {"--tensor-parallel-size": "tensor_parallel_size", "--data-parallel-size": "data_parallel_size",
                 "--gpu-memory-utilization": "gpu_memory_utilization", "--max-model-len": "max_model_len",
                 "--base-url": "base_url", "--api-key-env": "api_key_env", "--concurrency": "concurrency",
                 "--timeout": "timeout_s", "--max-retries": "max_retries"}


def removed_flag(flag: str) -> str:
    """The one line of a removed engine flag: its ``--backend-arg`` spelling (and its file key)."""
    name = REMOVED_FLAGS[flag]
    return (f"{flag} was removed: give --backend-arg {name}=VALUE (in a file: backend_args: {{{name}: VALUE}}); "
            "`evalita-eval backends` lists each backend's options")


class RunSpecError(ValueError):
    """A run's options that are not what ``run`` takes: one line naming the file, the run and the key."""


def _help(text: str, **extra: Any) -> Any:
    """A field's ``--help`` text (and ``metavar``, ``flag``: how eval/cli/run.py spells its option)."""
    return {"description": text, "json_schema_extra": extra or None}


class RunSpec(BaseModel):
    """Everything ``evalita-eval run`` takes, typed, in ``--help`` order; None means the option's default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(**_help("Local folder or Hub id of a causal language model (required, here or in --config)."))
    revision: str | None = Field(None, **_help("Model revision (branch, tag or commit) on the Hub."))
    model_name: str | None = Field(None, **_help(
        "How results, reports, cards and exports name the model (recorded as model.name; changes no number). "
        "Default: the Hub id, or a local folder's name and its weights hash (plain-3f2a9c1e)."))
    data: str | None = Field(None, **_help(
        "Local build folder (evalita-data build), a folder in the Hub layout, or hf:ORG for the official Evalita-LLM "
        "splits on the Hub (hf:evalitahf, as lm-eval's evalita_llm tasks)."))
    hub_org: str | None = Field(None, **_help("Read the datasets <ORG>/<task> from the Hub instead of --data."))
    tasks: list[str] | None = Field(None, **_help(
        "Comma-separated task ids or entries (e.g. te,sa,ner or ner_fic), or lm-eval's evalita_llm task and group "
        "names (evalita-mp, evalita-mp_wic_prompt-1, ...). Default: every task the data have."))
    prompts: list[str] | None = Field(None, **_help(
        "Comma-separated prompt names (e.g. p1,p3). Default: every prompt."))
    num_fewshot: int = Field(0, ge=0, **_help("Few-shot examples per prompt."))
    limit: int | None = Field(None, ge=1, **_help("Evaluate only the first N documents of each task."))
    batch_size: int | None = Field(8, ge=1, **_help(
        "Requests per batch (hf backend), or auto: batches sized by tokens to fit --max-memory (docs/evaluator.md).",
        metavar="N|auto"))  # None: auto
    max_memory: int | None = Field(None, ge=1, **_help(
        "Memory one forward pass may take, e.g. 4GiB (--batch-size auto). "
        "Default: 80% of the free GPU memory on CUDA, 1GiB on CPU.", metavar="SIZE"))  # bytes
    backend: str = Field("hf", **_help(
        "The engine (the modules of evalita_eval/backends/ and the evalita_llm.backends entry points of installed "
        "packages register them; `evalita-eval backends` lists them and each one's options). hf: batched plain "
        "path, parity-tested against lm-eval; vllm: vLLM's engine, see docs/engines.md."))
    device: str | None = Field(None, **_help(
        "cpu, cuda, cuda:N, or auto: spread a model larger than one device over all GPUs (device_map=auto, needs "
        "accelerate). Default: cuda when torch sees a GPU, else cpu."))
    dtype: Literal[DTYPES] = Field("auto", **_help("The weights' dtype."))  # type: ignore[valid-type]
    max_length: int | None = Field(None, ge=1, **_help(
        "Context length in tokens; default: the model's own (lm-eval's rule)."))
    threads: int | None = Field(None, ge=1, **_help("torch intra-op threads (CPU); default: torch's."))
    # Typed by the backend's own Options (and the replicas' options) when validated: ``_backend_args``.
    backend_args: dict[str, Any] = Field(default_factory=dict, **_help(
        "An option of the chosen backend (repeatable), typed and checked: `evalita-eval backends` lists each "
        "backend's options (e.g. base_url, concurrency for openai-*; tensor_parallel_size for vllm).",
        metavar="KEY=VALUE", flag="--backend-arg"))
    apply_chat_template: bool = Field(False, **_help(
        "Render prompts with the tokenizer's chat template (instruction-tuned models)."))
    trust_remote_code: bool = Field(False, **_help("Allow model code from the Hub to run (off by default)."))
    max_new_tokens: int | None = Field(None, ge=1, **_help(
        "Override the generative tasks' limit (256, lm-eval's default), e.g. for a quick check."))
    seed: int = Field(1234, **_help("Seed of the few-shot sampler (lm-eval's default)."))
    setting: Literal[SETTINGS] = Field("loglikelihood", **_help(  # type: ignore[valid-type]
        "How MC tasks are asked: log-likelihood of each choice, or a generated answer: ce (lettered options), "
        "ce-ni (options without letters), oe (no options). See docs/settings.md."))
    constrained: bool = Field(False, **_help(
        "Constrained decoding (xgrammar): answers limited to the choices or the task's output format."))
    system_instruction: str | None = Field(None, **_help("System instruction (as lm-eval's --system_instruction)."))
    fewshot_as_multiturn: bool | None = Field(None, **_help(
        "Few-shot examples as user/assistant turns (default with --apply-chat-template, as lm-eval) or in one "
        "user turn."))
    split: str | None = Field(None, **_help(
        "Evaluate this split instead of the task's official one (e.g. dev for hs, train for rel); recorded in "
        "results.json and marked 'not comparable with the paper' in reports and cards."))
    output_dir: str | None = Field(None, **_help(
        "Where results.json, samples/ and the resume cache go. Default: results/<model>[@revision]/<setting>"
        "[-constrained][-<k>shot][-<split>][-thinking]-<run id>, the run id being a hash of every input that can "
        "change a number; a folder holding another run's results is refused."))
    overwrite: bool = Field(False, **_help(
        "Replace the results of another run in --output-dir (its resume cache is kept)."))
    progress: bool | None = Field(None, **_help("A progress bar per task (default: on a terminal only)."))
    # Reasoning models (docs/settings.md): thinking on or off, the trace's markers and budget; the BERTScore scorer.
    thinking: bool = Field(False, **_help(
        "on: let a reasoning model think before it answers (generated settings and generative tasks): the chat "
        "template's enable_thinking, the server's switch on openai-chat; the trace is kept apart from the answer. "
        "Default: off.",
        metavar="on|off"))
    think_markers: tuple[str, str] = Field(DEFAULT_MARKERS, **_help(
        "The markers around a trace (default: <think>,</think>): the answer is what follows the last END.",
        metavar="START,END"))
    max_thinking_tokens: int | None = Field(None, ge=1, **_help(
        "With --thinking on: close the trace at N tokens and generate the answer after it with the task's own budget "
        "(budget forcing; hf, vllm, openai-completions). Default: the answer budget plus 1024 trace tokens, never "
        "forced."))
    bertscore_model: str | None = Field(None, **_help(
        "Add BERTScore F1 to the OE and CE-NI settings, computed with this model (the bertscore extra); absent "
        "without it.", metavar="PATH_OR_ID"))

    @field_validator("tasks", "prompts", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        """A comma-separated string (as on the command line) or a list of names."""
        if isinstance(value, str):
            return [x.strip() for x in value.split(",") if x.strip()] or None
        return value

    @field_validator("batch_size", mode="before")
    @classmethod
    def _batch_size(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str) and value.strip() == "auto":
            return None
        # A number in a file is written as one (``typed``: build_spec's strict pass); the command line's are strings.
        if isinstance(value, str) and (not value.strip().isdigit() or (info.context or {}).get("typed")):
            raise ValueError(f"expected a positive integer or auto, got {short(value)}")
        return value

    @field_validator("thinking", mode="before")
    @classmethod
    def _thinking(cls, value: Any) -> Any:
        """on|off as the command line spells it (a file's bare on/off is YAML's boolean already)."""
        return {"on": True, "off": False}.get(value.strip().lower(), value) if isinstance(value, str) else value

    @field_validator("max_memory", mode="before")
    @classmethod
    def _max_memory(cls, value: Any) -> Any:
        from .backend_support.memory import parse_memory

        return parse_memory(value) if isinstance(value, str) else value

    @field_validator("think_markers", mode="before")
    @classmethod
    def _think_markers(cls, value: Any) -> Any:
        """START,END as on the command line, or a list of the two; two markers, neither inside the other."""
        from .settings.thinking import parse_markers

        return parse_markers(value) if isinstance(value, (str, list, tuple)) else value

    @field_validator("model_name")
    @classmethod
    def _model_name(cls, value: str | None) -> str | None:
        from .naming import check_given_name

        return None if value is None else check_given_name(value)

    @field_validator("backend")
    @classmethod
    def _backend(cls, value: str) -> str:
        from .backends import backend_names

        if value not in backend_names():
            raise ValueError(f"expected one of {', '.join(backend_names())}")
        return value

    @field_validator("backend_args")
    @classmethod
    def _backend_args(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        """The values typed as the backend declares them (a wrong backend: its own error, above)."""
        from .api import BackendOptions
        from .backend_support.options import resolve_options
        from .backends import get_backend_class
        from .replicas import replica_args

        if "backend" not in info.data:
            return value
        replicas, own = replica_args(value)
        own = resolve_options(get_backend_class(info.data["backend"]), BackendOptions("", extra=own))[0].extra
        typed = {**replicas, **own}
        return {name: typed[name] for name in value}

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> "RunSpec":
        """The rules between options: each broken one names its key (``spec_error``); checked once a file's values
        are read strictly (``build_spec``)."""
        if (info.context or {}).get("fields_only"):
            return self
        for key, broken, message in (
            ("data", (self.data is None) == (self.hub_org is None), "give exactly one of --data DIR or --hub-org ORG"),
            ("fewshot_as_multiturn", self.fewshot_as_multiturn and not self.apply_chat_template,
             "--fewshot-as-multiturn needs --apply-chat-template (as in lm-eval)"),
            ("max_thinking_tokens", self.max_thinking_tokens is not None and not self.thinking,
             "--max-thinking-tokens bounds a trace: it needs --thinking on"),
            # A grammar would forbid the trace: the constraint applies to the answer generated after it is closed.
            ("constrained", self.constrained and self.thinking and self.max_thinking_tokens is None,
             "--constrained with --thinking on needs --max-thinking-tokens N: the constraint applies to the answer "
             "generated after the trace is closed"),
        ):
            if broken:
                raise PydanticCustomError("rule", message, {"key": key})
        return self

    @property
    def reasoning(self) -> Thinking:
        """The thinking options as the runner's task kinds read them (settings/thinking.py)."""
        return Thinking(self.thinking, self.think_markers, self.max_thinking_tokens)

    @property
    def skip_missing(self) -> bool:
        """A run over every task (no --tasks) skips, with a note, the tasks whose split the data lack."""
        return self.tasks is None


def spec_error(err: ValidationError, where: str | None) -> RunSpecError:
    """The first error of a validation as one line: ``WHERE: key K: expected ..., got V``; given on the
    command line alone (``where`` None), named by its option: ``--k: expected ...``."""
    error = err.errors()[0]
    key = ".".join(str(part) for part in error["loc"]) or (error.get("ctx") or {}).get("key", "?")
    if error["type"] == "extra_forbidden":
        flag = "--" + key.replace("_", "-")
        if flag in REMOVED_FLAGS:
            return RunSpecError(f"{where + ': ' if where else ''}key {key}: " + removed_flag(flag))
        close = difflib.get_close_matches(key, list(RunSpec.model_fields), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return RunSpecError(f"{where + ': ' if where else ''}unknown key {short(key)}{hint}; the keys are those of "
                            "`evalita-eval run --help`, underscores for dashes")
    said = expected(error)
    if where:
        return RunSpecError(f"{where}: key {key}: {said}")
    return RunSpecError(said if said.startswith(("--", "give ")) else f"--{key.replace('_', '-')}: {said}")


def build_spec(values: dict[str, Any], where: str | None, given: frozenset[str] = frozenset(),
               given_args: frozenset[str] = frozenset()) -> tuple[RunSpec, list[str]]:
    """The ``RunSpec`` of ``values`` and a note per lm-eval task name read as ours; a ``RunSpecError`` naming
    ``where`` and the key otherwise. ``given``, ``given_args``: the keys and backend_args given on the command line
    (strings the spec reads); a file's values (``where``) are typed as written: ``limit: true`` or
    ``num_fewshot: "2"`` is refused, never read as 1 or 2."""
    try:
        spec = RunSpec.model_validate(values, context={"fields_only": bool(where)})
        if where:  # the file's keys again, strictly (the command line's as they were read), and the rules
            for name, value in (values.get("backend_args") or {}).items():
                typed_arg = spec.backend_args[name]
                if name not in given_args and isinstance(value, str) and not isinstance(typed_arg, str | None):
                    raise RunSpecError(f"{where}: key backend_args.{name}: expected {type(typed_arg).__name__}, "
                                       f"not the string {short(value)}")
            typed = {**values, **{key: getattr(spec, key) for key in given if key in values}}
            spec = RunSpec.model_validate(typed, strict=True, context={"typed": True})
    except ValidationError as err:  # a value given on the command line is named as its option (backend_args: merged)
        loc = err.errors()[0]["loc"]
        raise spec_error(err, None if loc and loc[0] in given - {"backend_args"} else where) from None
    if not spec.tasks:
        return spec, []
    folded, notes = lm_eval_tasks(spec.model_dump(exclude_unset=True), where)
    return RunSpec.model_validate(folded), notes


def lm_eval_tasks(values: dict[str, Any], where: str | None) -> tuple[dict[str, Any], list[str]]:
    """``values`` with lm-eval's task, group and tag names in ``tasks`` read as ours (reporting/lm_eval_tasks.py), a
    prompt-level name's prompt as ``prompts``; a note per mapped name."""
    from .reporting.lm_eval_tasks import from_lm_eval

    try:
        tasks, prompts, notes = from_lm_eval(values["tasks"])
    except ValueError as err:
        raise RunSpecError(f"{where + ': key tasks' if where else '--tasks'}: {err}") from None
    if prompts is not None and values.get("prompts") not in (None, prompts):
        raise RunSpecError(f"{where + ': key tasks' if where else '--tasks'}: its lm-eval names ask prompts "
                           f"{','.join(prompts)}, --prompts {','.join(values['prompts'])}: give one")
    return {**values, "tasks": tasks, **({"prompts": prompts} if prompts is not None else {})}, notes


def read_config_file(path: Path) -> dict[str, Any]:
    """A --config file: a YAML (or JSON) mapping read by config_file's rules; an error naming the file otherwise."""
    doc = load_file(path)  # a ConfigFileError
    if not isinstance(doc, dict):
        raise RunSpecError(f"{path}: expected a mapping of run options (model: ..., limit: ...), got "
                           f"{type(doc).__name__}")
    return doc


def backend_options(spec: RunSpec, device: str) -> Any:
    """The ``BackendOptions`` of ``spec``: the options every backend reads, and backend_args as ``extra``."""
    from .api import BackendOptions

    return BackendOptions(model=spec.model, revision=spec.revision, device=device, dtype=spec.dtype,
                          batch_size=spec.batch_size, trust_remote_code=spec.trust_remote_code,
                          max_length=spec.max_length, max_memory=spec.max_memory, threads=spec.threads, seed=spec.seed,
                          extra=dict(spec.backend_args))


def cli_values(given: dict[str, Any], explicit: set[str], file_values: dict[str, Any]) -> dict[str, Any]:
    """The values of a run: ``file_values`` (--config), overridden by the options in ``explicit``
    (given on the command line); ``--backend-arg`` overrides backend_args key by key."""
    values = dict(file_values)
    for param, value in given.items():
        if param == "backend_args":
            bad = [a for a in value if "=" not in a]
            if bad:
                raise RunSpecError(f"--backend-arg: expected KEY=VALUE, got {bad[0]!r}")
            base = values.get("backend_args") or {}
            if value and isinstance(base, dict):  # (another type: the file's error, named by the validation)
                values["backend_args"] = {**base, **dict(a.split("=", 1) for a in value)}
        elif param in explicit:
            values[param] = value
    return values

"""One typed description of a run's options (``RunSpec``), built and validated in one place from
the command line of ``evalita-eval run`` (eval/cli/run.py), from ``run --config FILE`` (a YAML or
JSON mapping of the same keys, underscores for dashes; options given on the command line override
it, as lm-eval's ``--config``) and from each run of a sweep file (eval/sweep.py).

Every error is one line naming where the values came from (the file, and the run of a sweep), the
key and what was expected. The engine flags that alias ``--backend-arg NAME=VALUE``
(``--tensor-parallel-size``, ``--base-url`` ...; ``backend_support.options.ENGINE_FLAGS``) are
typed keys here too, folded into ``backend_args`` with a note naming the ``--backend-arg`` spelling.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .backend_support.options import ENGINE_FLAGS
from .config_file import ConfigFileError, load_file, short

SETTINGS = ("loglikelihood", "ce", "ce-ni", "oe")
DTYPES = ("auto", "float32", "float16", "bfloat16")
# The file key of each engine flag: its flag without dashes (--timeout -> timeout), and its option name.
ALIAS_KEYS: dict[str, str] = {flag.removeprefix("--").replace("-", "_"): name for name, (flag, _) in ENGINE_FLAGS.items()}


class RunSpecError(ValueError):
    """A run's options that are not what ``run`` takes: one line naming the file, the run and the key."""


class RunSpec(BaseModel):
    """Everything ``evalita-eval run`` takes, typed; None means the option's default (resolved by ``run``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    revision: str | None = None
    model_name: str | None = None  # --model-name: how outputs name the model (naming.py); not in the run identity
    data: str | None = None
    hub_org: str | None = None
    tasks: list[str] | None = None
    prompts: list[str] | None = None
    num_fewshot: int = Field(0, ge=0)
    limit: int | None = Field(None, ge=1)
    batch_size: int | None = Field(8, ge=1)  # None: auto (batches sized by tokens)
    max_memory: int | None = Field(None, ge=1)  # bytes; a size such as 4GiB is read as bytes
    backend: str = "hf"
    device: str | None = None
    dtype: Literal[DTYPES] = "auto"  # type: ignore[valid-type]
    max_length: int | None = Field(None, ge=1)
    threads: int | None = Field(None, ge=1)
    backend_args: dict[str, Any] = Field(default_factory=dict)
    apply_chat_template: bool = False
    trust_remote_code: bool = False
    max_new_tokens: int | None = Field(None, ge=1)
    seed: int = 1234
    setting: Literal[SETTINGS] = "loglikelihood"  # type: ignore[valid-type]
    constrained: bool = False
    system_instruction: str | None = None
    fewshot_as_multiturn: bool | None = None
    split: str | None = None
    output_dir: str | None = None
    overwrite: bool = False
    progress: bool | None = None
    # Reasoning models (docs/settings.md): thinking on or off, the trace's markers and budget; the BERTScore scorer.
    thinking: Literal["on", "off"] = "off"
    think_markers: tuple[str, str] = ("<think>", "</think>")
    max_thinking_tokens: int | None = Field(None, ge=1)
    bertscore_model: str | None = None
    # The engine flags (aliases of backend_args; folded into it by ``fold_aliases``).
    tensor_parallel_size: int | None = Field(None, ge=1)
    data_parallel_size: int | None = Field(None, ge=1)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    max_model_len: int | None = Field(None, ge=1)
    base_url: str | None = None
    api_key_env: str | None = None
    concurrency: int | None = Field(None, ge=1)
    timeout: float | None = Field(None, gt=0)
    max_retries: int | None = Field(None, ge=0)

    @field_validator("tasks", "prompts", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        """A comma-separated string (as on the command line) or a list of names."""
        if isinstance(value, str):
            return [x.strip() for x in value.split(",") if x.strip()] or None
        return value

    @field_validator("batch_size", mode="before")
    @classmethod
    def _batch_size(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip() != "auto":  # a number in a file is written as one (strict types)
            raise ValueError("expected a positive integer or auto")
        return None if isinstance(value, str) else value

    @field_validator("max_memory", mode="before")
    @classmethod
    def _max_memory(cls, value: Any) -> Any:
        from .backend_support.memory import parse_memory

        return parse_memory(value) if isinstance(value, str) else value

    @field_validator("thinking", mode="before")
    @classmethod
    def _thinking(cls, value: Any) -> Any:
        """YAML reads a bare on/off as a boolean."""
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value

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

    @property
    def tasks_option(self) -> str | None:
        """--tasks as the command line spells it."""
        return ",".join(self.tasks) if self.tasks else None

    @property
    def prompts_option(self) -> str | None:
        return ",".join(self.prompts) if self.prompts else None


def _expected(error: dict) -> str:
    """What a pydantic error says was expected, in words."""
    kind, ctx = error["type"], error.get("ctx") or {}
    words = {
        "int_parsing": "an integer", "int_type": "an integer", "int_from_float": "a whole number", "float_parsing": "a number",
        "float_type": "a number", "bool_parsing": "true or false", "bool_type": "true or false", "string_type": "a string",
        "dict_type": "a mapping of NAME: VALUE", "list_type": "a list (or a comma-separated string)", "missing": "a value (it is required)",
    }
    if kind in words:
        return "expected " + words[kind]
    if kind == "literal_error":
        return "expected one of " + ctx.get("expected", "").replace("'", "")
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        sign = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "")
        return f"expected a number {sign} {bound:g}" if isinstance(bound, int | float) else f"expected a number {sign} {bound}"
    return str(error["msg"]).removeprefix("Value error, ")


def _at(where: str | None, key: str) -> str:
    """``FILE: run N: key K``, or the option ``--k`` for values given on the command line alone (``where`` None)."""
    return f"{where}: key {key}" if where else f"--{key.replace('_', '-')}"


def spec_error(err: ValidationError, where: str | None, keys: list[str]) -> RunSpecError:
    """The first error of a validation as one line: ``WHERE: key K: expected ..., got V``."""
    error = err.errors()[0]
    key = ".".join(str(part) for part in error["loc"]) or "?"
    if error["type"] == "extra_forbidden":
        close = difflib.get_close_matches(key, keys, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return RunSpecError(f"{where + ': ' if where else ''}unknown key {short(key)}{hint}; "
                            "the keys are those of `evalita-eval run --help`, "
                            "underscores for dashes")
    got = "" if error["type"] == "missing" else f", got {short(error.get('input'))}"
    return RunSpecError(f"{_at(where, key)}: {_expected(error)}{got}")


def _same(given: Any, value: Any) -> bool:
    """Whether a backend_args value (a string from --backend-arg, or typed) means the alias's ``value``."""
    try:
        return given == value or str(given).strip() == str(value) or float(str(given)) == float(value)
    except (TypeError, ValueError):
        return False


def fold_aliases(values: dict[str, Any], where: str | None) -> tuple[dict[str, Any], list[str]]:
    """``values`` with each engine-flag key moved into ``backend_args`` (a different value there is an
    error), and a note per key naming the ``--backend-arg`` spelling."""
    values, notes = dict(values), []
    args = dict(values.get("backend_args") or {})  # validated: a mapping
    for key, name in ALIAS_KEYS.items():
        if values.get(key) is None:
            values.pop(key, None)
            continue
        value = values.pop(key)
        if name in args and not _same(args[name], value):
            raise RunSpecError(f"{_at(where, key)}: {short(value)} disagrees with backend_args {name}: "
                               f"{short(args[name])}; give one")
        args[name] = value
        notes.append(f"note: --{key.replace('_', '-')} ({key}: in a file) is an alias of --backend-arg {name}={value} "
                     f"(in a file: backend_args: {{{name}: {value}}}), kept for one release")
    if args:
        values["backend_args"] = args
    return values, notes


def build_spec(values: dict[str, Any], where: str | None,
               given_args: frozenset[str] = frozenset()) -> tuple[RunSpec, list[str]]:
    """The ``RunSpec`` of ``values`` (validated, engine flags folded into backend_args) and the notes
    on the aliases used; a ``RunSpecError`` naming ``where`` and the key otherwise. ``given_args``: the
    backend_args given as ``--backend-arg NAME=VALUE`` (strings to convert; a file's values are typed)."""
    try:
        # Strict: a file's `limit: true` or `num_fewshot: "2"` is refused, never read as 1 or 2 (click's are typed).
        spec = RunSpec.model_validate(values, strict=True)  # every key typed, the aliases included
    except ValidationError as err:
        raise spec_error(err, where, list(RunSpec.model_fields)) from None
    folded, notes = fold_aliases(spec.model_dump(exclude_unset=True), where)
    if spec.tasks:
        folded, mapped = lm_eval_tasks(folded, where)
        notes += mapped
    spec = RunSpec.model_validate(folded)
    check_backend_args(spec, where, given_args)
    return spec, notes


def lm_eval_tasks(values: dict[str, Any], where: str | None) -> tuple[dict[str, Any], list[str]]:
    """``values`` with lm-eval's task, group and tag names in ``tasks`` read as ours (reporting/lm_eval_tasks.py), a
    prompt-level name's prompt as ``prompts``; a note per mapped name."""
    from .reporting.lm_eval_tasks import from_lm_eval

    try:
        tasks, prompts, notes = from_lm_eval(values["tasks"])
    except ValueError as err:
        raise RunSpecError(f"{_at(where, 'tasks')}: {err}") from None
    if prompts is not None and values.get("prompts") not in (None, prompts):
        raise RunSpecError(f"{_at(where, 'tasks')}: its lm-eval names ask prompts {','.join(prompts)}, --prompts "
                           f"{','.join(values['prompts'])}: give one")
    return {**values, "tasks": tasks, **({"prompts": prompts} if prompts is not None else {})}, notes


def check_backend_args(spec: RunSpec, where: str | None, given_args: frozenset[str] = frozenset()) -> None:
    """backend_args checked against the backend's declared options (typed), before anything starts; a
    string from a file (not in ``given_args``) is refused where the option is no string."""
    from .api import BackendOptions
    from .backend_support.options import BackendOptionError, resolve_options
    from .backends import get_backend_class
    from .replicas import REPLICA_OPTIONS, replica_settings

    options = BackendOptions(model=spec.model, extra=dict(spec.backend_args))
    try:
        replicas = replica_settings(options)[0]
        resolved = resolve_options(get_backend_class(spec.backend), BackendOptions(model=spec.model, extra={
            k: v for k, v in spec.backend_args.items() if k not in REPLICA_OPTIONS}))[0]
    except (BackendOptionError, ValueError) as err:
        raise RunSpecError(f"{where}: key backend_args: {err}" if where else str(err)) from None
    typed = {**resolved.extra, "data_parallel_size": replicas}
    for name, value in spec.backend_args.items():
        if where and name not in given_args and isinstance(value, str) and not isinstance(typed.get(name), str | None):
            raise RunSpecError(f"{where}: key backend_args.{name}: expected {type(typed[name]).__name__}, "
                               f"not the string {short(value)}")


def read_config_file(path: Path) -> dict[str, Any]:
    """A --config file: a YAML (or JSON) mapping, read by eval/config_file.py's rules; one line naming the file
    otherwise."""
    try:
        doc = load_file(path)
    except ConfigFileError as err:
        raise RunSpecError(str(err)) from None
    if not isinstance(doc, dict):
        raise RunSpecError(f"{path}: expected a mapping of run options (model: ..., limit: ...), got {type(doc).__name__}")
    return doc


def spec_file_values(spec: RunSpec) -> dict[str, Any]:
    """The keys of ``spec`` given (not defaults), as a --config file holds them."""
    return spec.model_dump(exclude_unset=True)


def runner_config(spec: RunSpec, device: str, progress: bool) -> Any:
    """The runner's ``RunConfig`` of ``spec`` (``device``: resolved; ``progress``: bars or not)."""
    from .running.runner import RunConfig

    return RunConfig(progress=progress, num_fewshot=spec.num_fewshot, limit=spec.limit, batch_size=spec.batch_size, max_memory=spec.max_memory,
                     apply_chat_template=spec.apply_chat_template, seed=spec.seed, device=device, prompts=spec.prompts,
                     max_new_tokens=spec.max_new_tokens, skip_missing=spec.tasks is None, setting=spec.setting, constrained=spec.constrained,
                     system_instruction=spec.system_instruction, fewshot_as_multiturn=spec.fewshot_as_multiturn, split=spec.split,
                     overwrite=spec.overwrite,
                     # They change numbers: in the identity a sweep compares (sweep_runs.py) as in the run's.
                     thinking=spec.thinking == "on", think_markers=tuple(spec.think_markers), max_thinking_tokens=spec.max_thinking_tokens,
                     bertscore_model=spec.bertscore_model)


def backend_options(spec: RunSpec, device: str) -> Any:
    """The ``BackendOptions`` of ``spec``: the options every backend reads, and backend_args as ``extra``."""
    from .api import BackendOptions

    return BackendOptions(model=spec.model, revision=spec.revision, device=device, dtype=spec.dtype, batch_size=spec.batch_size,
                          trust_remote_code=spec.trust_remote_code, max_length=spec.max_length, max_memory=spec.max_memory,
                          threads=spec.threads, seed=spec.seed, extra=dict(spec.backend_args))


# `run`'s parameters whose key differs from the parameter's name (the key: the flag, underscores for dashes).
PARAM_KEYS = {"data_dir": "data", "backend_name": "backend", "eval_split": "split", "timeout_s": "timeout"}


def cli_values(given: dict[str, Any], explicit: set[str], file_values: dict[str, Any]) -> dict[str, Any]:
    """The values of a run: ``file_values`` (--config), overridden by the options in ``explicit`` (given on the
    command line) whatever the spelling: ``--base-url`` over the file's ``backend_args: {base_url: ...}`` as over its
    ``base_url:``; ``--backend-arg NAME=VALUE`` over backend_args key by key and over the alias key of NAME."""
    bad = [a for a in given.get("backend_args") or () if "=" not in a]
    if bad:
        raise RunSpecError(f"--backend-arg: expected KEY=VALUE, got {bad[0]!r}")
    pairs = dict(a.split("=", 1) for a in given.get("backend_args") or ())
    ours = {PARAM_KEYS.get(p, p): v for p, v in given.items() if p in explicit and p != "backend_args"}
    fold_aliases({**ours, "backend_args": pairs}, None)  # --base-url X --backend-arg base_url=Y: named as the two flags
    overridden = {ALIAS_KEYS[key] for key in ours if key in ALIAS_KEYS} | set(pairs)  # backend_args names set here
    values = {key: v for key, v in file_values.items() if ALIAS_KEYS.get(key) not in overridden}
    base = values.get("backend_args")
    if isinstance(base, dict):  # (another type: the file's error, named by the validation)
        values["backend_args"] = {name: v for name, v in base.items() if name not in overridden} | pairs
    elif base is None and pairs:
        values["backend_args"] = pairs
    return {**values, **ours}

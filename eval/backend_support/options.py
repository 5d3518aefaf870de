"""Each backend's own settings (``Backend.Options``): filled from ``--backend-arg NAME=VALUE``
(and the engine flags that are aliases of them), converted to their declared types, listed
by ``evalita-eval backends``.

``resolve_options`` is what ``create_backend`` calls: it returns the ``BackendOptions`` the
backend is built from (``engine``: the typed ``Options`` instance, which ``from_options``
reads; ``extra`` set to the typed values) and the ``Options`` instance, or fails with one
line naming the backend, the option and what was expected. The engine flags (``ENGINE_FLAGS``) are
folded into ``extra`` by ``run_config.fold_aliases`` (``run``, ``run --config`` and sweep entries
alike), so ``BackendOptions`` holds only what every backend reads.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, Field, asdict, dataclass, fields, replace
from typing import Any

from ..api import Backend, BackendOptions
from ..config_file import short

_NONE_WORDS = frozenset({"none", "null"})
_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off"})
# The hidden flags of ``run`` that alias ``--backend-arg NAME=VALUE``: NAME -> (flag, the flag's
# default, which means "not given"). The backends declaring NAME name the same flag in their Options.
ENGINE_FLAGS: dict[str, tuple[str, Any]] = {
    "tensor_parallel_size": ("--tensor-parallel-size", 1),
    "data_parallel_size": ("--data-parallel-size", 1), "gpu_memory_utilization": ("--gpu-memory-utilization", None),
    "max_model_len": ("--max-model-len", None), "base_url": ("--base-url", None), "api_key_env": ("--api-key-env", None),
    "concurrency": ("--concurrency", 4), "timeout_s": ("--timeout", 120.0), "max_retries": ("--max-retries", 5),
}


class BackendOptionError(ValueError):
    """A --backend-arg the backend does not have, or a value of the wrong type."""


@dataclass(frozen=True)
class OptionInfo:
    """One option of a backend, as ``evalita-eval backends`` lists it."""

    name: str
    type: str
    default: Any
    help: str
    changes_numbers: bool
    flag: str | None


def _type_name(tp: Any) -> str:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        return f"{_type_name(args[0])} or none"
    origin = typing.get_origin(tp) or tp
    return {int: "int", float: "float", bool: "bool", str: "str", dict: "JSON object", list: "JSON list"}.get(origin, str(tp))


def _convert(value: Any, tp: Any, where: str) -> Any:
    """``value`` (a command-line string, or a Python value given through the API) as type ``tp``."""
    declared, args = tp, typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.strip().lower() in _NONE_WORDS):
            return None
        (tp,) = [a for a in args if a is not type(None)]
    origin = typing.get_origin(tp) or tp
    if origin is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
            return value.strip().lower() in _TRUE_WORDS
    elif origin in (int, float):
        if isinstance(value, origin) and not isinstance(value, bool):
            return value
        if isinstance(value, int) and not isinstance(value, bool) and origin is float:
            return float(value)
        if isinstance(value, str):
            try:
                number = origin(value.strip())
            except ValueError:
                pass
            else:
                if origin is int or number == number and abs(number) != float("inf"):  # a finite float
                    return number
    elif origin is str:
        if isinstance(value, str):
            return value
    elif origin in (dict, list):
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as err:
                raise BackendOptionError(f"{where}: expected {_type_name(declared)} in JSON, got {short(value)} "
                                         f"({err})") from None
        if isinstance(value, origin):
            return value
    raise BackendOptionError(f"{where}: expected {_type_name(declared)}, got {short(value)}")


def _hints(options_class: type) -> dict[str, Any]:
    return typing.get_type_hints(options_class)


def describe_options(backend: type[Backend]) -> list[OptionInfo]:
    """The options of a backend, in declaration order (none for a backend without ``Options``)."""
    if backend.Options is None:
        return []
    hints = _hints(backend.Options)
    return [
        OptionInfo(f.name, _type_name(hints[f.name]), _default(f), f.metadata.get("help", ""), f.metadata.get("changes_numbers", True),
                   f.metadata.get("flag"))
        for f in fields(backend.Options)
    ]


def _default(f: Field) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else f.default  # type: ignore[misc]


def resolve_options(backend: type[Backend], options: BackendOptions) -> tuple[BackendOptions, Any]:
    """(the BackendOptions to build ``backend`` from, its ``Options`` instance or None).

    A field of ``Options`` takes its ``--backend-arg`` (or the flag alias folded into ``extra``
    by ``options_from_cli``), else its default. An unknown name (an engine flag that ``backend``
    does not take is named by its flag too) or a value of the wrong type is an error."""
    if backend.Options is None:  # an older backend reads options.extra itself
        return options, None
    declared = {f.name: f for f in fields(backend.Options)}
    have = ", ".join(declared) or "none"
    unknown = sorted(set(options.extra) - set(declared))
    if unknown:
        # An engine flag given to a backend that does not take it would be silently ignored.
        flag = f" ({ENGINE_FLAGS[unknown[0]][0]})" if unknown[0] in ENGINE_FLAGS else ""
        raise BackendOptionError(f"--backend-arg {unknown[0][:60]}{flag}: backend {backend.name!r} has no such option "
                                 f"(its options: {have}; "
                                 "`evalita-eval backends` lists them)")
    hints = _hints(backend.Options)
    values = {name: _convert(options.extra[name], hints[name], f"--backend-arg {name} (backend {backend.name!r})")
              for name in declared if name in options.extra}
    engine = backend.Options(**values)
    return replace(options, extra={name: getattr(engine, name) for name in options.extra}, engine=engine), engine


def engine_of(backend: type[Backend], options: BackendOptions) -> Any:
    """``options.engine``, or for options not resolved yet (a backend built with
    ``from_options`` directly) ``backend``'s ``Options`` resolved from them."""
    return options.engine if options.engine is not None else resolve_options(backend, options)[1]


def engine_fields(backend: Backend) -> dict[str, Any] | None:
    """The typed ``Options`` of a built backend as a dict; None for a backend without them."""
    engine = backend.engine_options
    return None if engine is None else asdict(engine)


def options_table(backend: type[Backend]) -> str:
    """A backend's options as ``evalita-eval backends`` prints them: name, type, default, help."""
    rows = [(o.name, o.type, f"default {o.default!r}" if o.default is not None else "default none",
             o.help + (f" (alias {o.flag})" if o.flag else "") + ("" if o.changes_numbers else " [cannot change a number: not in the cache key]"))
            for o in describe_options(backend)]
    if not rows:
        return "    no options of its own" if backend.Options is not None else "    any --backend-arg KEY=VALUE, as strings (no Options declared)"
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"    {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}" for r in rows)

"""Each backend's own settings (``Backend.Options``): filled from ``--backend-arg NAME=VALUE``
(and the engine flags that are aliases of them), converted to their declared types, listed
by ``evalita-eval backends``.

``resolve_options`` is what ``create_backend`` calls: it returns the ``BackendOptions`` the
backend is built from (``engine``: the typed ``Options`` instance, which ``from_options``
reads; the flag-alias fields and ``extra`` set to the typed values) and the ``Options``
instance, or fails with one line naming the backend, the option and what was expected.
``options_from_cli`` is how the CLI builds the ``BackendOptions`` from its parsed arguments.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, Field, asdict, dataclass, fields, replace
from typing import Any, Sequence

from ..api import Backend, BackendOptions

_NONE_WORDS = frozenset({"none", "null"})
_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
_FALSE_WORDS = frozenset({"0", "false", "no", "off"})
_BACKEND_OPTIONS_DEFAULTS = {f.name: f.default for f in fields(BackendOptions) if f.default is not MISSING}
# The run options every backend reads; BackendOptions' other fields are engine options that
# only the backends declaring them in their ``Options`` take (the flags aliasing --backend-arg).
COMMON_OPTIONS = frozenset({"model", "revision", "device", "dtype", "batch_size", "max_memory", "trust_remote_code", "max_length", "threads", "seed", "extra",
                            "engine"})


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
                raise BackendOptionError(f"{where}: expected {_type_name(declared)} in JSON, got {value!r} ({err})") from None
        if isinstance(value, origin):
            return value
    raise BackendOptionError(f"{where}: expected {_type_name(declared)}, got {value!r}")


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


def flag_of(name: str, backends: Sequence[type[Backend]]) -> str:
    """The run flag that sets BackendOptions.``name``, as the ``backends`` taking it declare it."""
    for backend in backends:
        for option in describe_options(backend):
            if option.name == name and option.flag:
                return option.flag
    return f"BackendOptions.{name}"


def resolve_options(backend: type[Backend], options: BackendOptions, others: Sequence[type[Backend]] = ()) -> tuple[BackendOptions, Any]:
    """(the BackendOptions to build ``backend`` from, its ``Options`` instance or None).

    A field of ``Options`` takes, in order: its ``--backend-arg``, else the ``BackendOptions``
    field of the same name (the flag alias, or the Python API), else its default. A name given
    both ways with two values, an unknown name, an engine flag that ``backend`` does not take
    (named as the ``others`` that take it declare it), or a value of the wrong type is an error."""
    if backend.Options is None:  # an older backend reads options.extra itself
        return options, None
    declared = {f.name: f for f in fields(backend.Options)}
    have = ", ".join(declared) or "none"
    unknown = sorted(set(options.extra) - set(declared))
    if unknown:
        raise BackendOptionError(f"--backend-arg {unknown[0]}: backend {backend.name!r} has no such option (its options: {have}; "
                                 "`evalita-eval backends` lists them)")
    # An engine flag given to a backend that does not take it would be silently ignored.
    ignored = [f.name for f in fields(BackendOptions) if f.name not in COMMON_OPTIONS | set(declared)
               and getattr(options, f.name) != _BACKEND_OPTIONS_DEFAULTS.get(f.name)]
    if ignored:
        raise BackendOptionError(f"{flag_of(ignored[0], others)}: backend {backend.name!r} has no such option (its options: {have}; "
                                 "`evalita-eval backends` lists them)")
    hints = _hints(backend.Options)
    values: dict[str, Any] = {}
    for name, f in declared.items():
        flag = f.metadata.get("flag") or f"BackendOptions.{name}"
        aliased = hasattr(options, name) and getattr(options, name) != _BACKEND_OPTIONS_DEFAULTS.get(name, MISSING)
        if name in options.extra:
            values[name] = _convert(options.extra[name], hints[name], f"--backend-arg {name} (backend {backend.name!r})")
            if aliased and getattr(options, name) != values[name]:
                raise BackendOptionError(f"--backend-arg {name}={options.extra[name]} and {flag} {getattr(options, name)} disagree; give one")
        elif aliased:
            values[name] = _convert(getattr(options, name), hints[name], f"{flag} (backend {backend.name!r})")
    engine = backend.Options(**values)
    typed = {name: getattr(engine, name) for name in options.extra}
    aliases = {name: getattr(engine, name) for name in declared if hasattr(options, name)}
    return replace(options, extra=typed, engine=engine, **aliases), engine


def engine_of(backend: type[Backend], options: BackendOptions) -> Any:
    """``options.engine``, or for options not resolved yet (a backend built with
    ``from_options`` directly) ``backend``'s ``Options`` resolved from them."""
    return options.engine if options.engine is not None else resolve_options(backend, options)[1]


def engine_fields(backend: Backend) -> dict[str, Any] | None:
    """The typed ``Options`` of a built backend as a dict; None for a backend without them."""
    engine = backend.engine_options
    return None if engine is None else asdict(engine)


def options_from_cli(backend_args: Sequence[str], **given: Any) -> BackendOptions:
    """The ``BackendOptions`` of ``evalita-eval run``: ``given`` are its parsed options that
    are ``BackendOptions`` fields (the shared ones and the flag aliases), ``backend_args`` its
    ``--backend-arg KEY=VALUE`` strings (a string without ``=`` is a ValueError)."""
    bad = [a for a in backend_args if "=" not in a]
    if bad:
        raise BackendOptionError(f"expected KEY=VALUE, got {bad[0]!r}")
    return BackendOptions(**given, extra=dict(a.split("=", 1) for a in backend_args))


def options_table(backend: type[Backend]) -> str:
    """A backend's options as ``evalita-eval backends`` prints them: name, type, default, help."""
    rows = [(o.name, o.type, f"default {o.default!r}" if o.default is not None else "default none",
             o.help + (f" (alias {o.flag})" if o.flag else "") + ("" if o.changes_numbers else " [cannot change a number: not in the cache key]"))
            for o in describe_options(backend)]
    if not rows:
        return "    no options of its own" if backend.Options is not None else "    any --backend-arg KEY=VALUE, as strings (no Options declared)"
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"    {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}" for r in rows)

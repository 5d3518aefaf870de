"""Each backend's own settings (``Backend.Options``, a dataclass of ``backend_option`` fields): filled from
``--backend-arg NAME=VALUE`` (``backend_args`` in a file), validated by pydantic against their declared types, listed
by ``evalita-eval backends`` (docs/adding-a-backend.md)."""

from __future__ import annotations

import json
import types
import typing
from dataclasses import MISSING, asdict, fields, replace
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config

from ..api import Backend, BackendOptions
from ..config_file import short

# A command-line value meaning None, for an option that may be none.
_NONE_WORDS = frozenset({"none", "null"})


class BackendOptionError(ValueError):
    """A --backend-arg the backend does not have, or a value of the wrong type."""


_WORDS = {"int_parsing": "an integer", "int_type": "an integer", "int_from_float": "a whole number",
          "float_parsing": "a number", "float_type": "a number", "finite_number": "a finite number",
          "bool_parsing": "true or false", "bool_type": "true or false", "string_type": "a string",
          "dict_type": "a mapping of NAME: VALUE", "list_type": "a list (or a comma-separated string)",
          "missing": "a value (it is required)"}
_SIGNS = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}


def expected(error: dict) -> str:
    """What a pydantic error says was expected, in words: ``expected an integer, got 'x'``."""
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in _WORDS:
        said = "expected " + _WORDS[kind]
    elif kind == "literal_error":
        said = "expected one of " + ctx.get("expected", "").replace("'", "")
    elif kind in _SIGNS:
        bound = next(iter(ctx.values()), "")
        said = f"expected a number {_SIGNS[kind]} {bound:g}" if isinstance(bound, int | float) else (
            f"expected a number {_SIGNS[kind]} {bound}")
    else:
        said = str(error["msg"]).removeprefix("Value error, ")
    if kind in ("missing", "rule", "value_error"):  # our validators' own words name the value
        return said
    return f"{said}, got {short(error.get('input'))}"


def _type_name(tp: Any) -> str:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        return f"{_type_name(args[0])} or none"
    origin = typing.get_origin(tp) or tp
    names = {int: "int", float: "float", bool: "bool", str: "str", dict: "JSON object", list: "JSON list"}
    return names.get(origin, str(tp))


def _from_text(value: Any, tp: Any) -> Any:
    """A command-line string as the value it spells for pydantic: none for an option that may be none,
    JSON for a mapping or a list; anything else as given (pydantic reads '2' as an int where one is due)."""
    if not isinstance(value, str):
        return value
    args = typing.get_args(tp)
    if type(None) in args and value.strip().lower() in _NONE_WORDS:
        return None
    if {typing.get_origin(a) or a for a in (args or (tp,))} & {dict, list}:
        try:
            return json.loads(value)
        except json.JSONDecodeError as err:
            raise ValueError(f"expected {_type_name(tp)} in JSON, got {short(value)} ({err})") from None
    return value


def resolve_options(backend: type[Backend], options: BackendOptions) -> tuple[BackendOptions, Any]:
    """(the BackendOptions to build ``backend`` from, ``engine`` set to its ``Options`` instance, which
    ``from_options`` reads; that instance or None). An unknown name or a value of the wrong type is an error."""
    declared = typing.get_type_hints(backend.Options) if backend.Options is not None else {}
    unknown = sorted(set(options.extra) - set(declared))
    if unknown:
        raise BackendOptionError(f"--backend-arg {unknown[0][:60]}: backend {backend.name!r} has no such option (its "
                                 f"options: {', '.join(declared) or 'none'}; `evalita-eval backends` lists them)")
    if backend.Options is None:
        return options, None
    where = "--backend-arg {} (backend " + repr(backend.name) + ")"
    try:
        given = {}
        for name, value in options.extra.items():
            given[name] = _from_text(value, declared[name])
        strict = with_config(ConfigDict(allow_inf_nan=False, extra="forbid"))  # finite numbers, no other keys
        engine = TypeAdapter(strict(backend.Options)).validate_python(given)
    except ValueError as err:  # a ValidationError, or a JSON value that does not parse (named)
        if isinstance(err, ValidationError):
            error = err.errors()[0]
            raise BackendOptionError(f"{where.format(error['loc'][0])}: {expected(error)}") from None
        raise BackendOptionError(f"{where.format(name)}: {err}") from None
    return replace(options, extra={name: getattr(engine, name) for name in options.extra}, engine=engine), engine


def engine_of(backend: type[Backend], options: BackendOptions) -> Any:
    """``options.engine``, or for options not resolved yet (``from_options`` called directly) ``backend``'s."""
    return options.engine if options.engine is not None else resolve_options(backend, options)[1]


def engine_fields(backend: Backend) -> dict[str, Any] | None:
    """The typed ``Options`` of a built backend as a dict; None for a backend without them."""
    engine = backend.engine_options
    return None if engine is None else asdict(engine)


def option_rows(backend: type[Backend]) -> list[tuple[str, str, str, str]]:
    """A backend's options as ``evalita-eval backends`` lists them, in declaration order: name, type, default, help."""
    hints = typing.get_type_hints(backend.Options) if backend.Options is not None else {}
    rows = []
    for f in fields(backend.Options) if backend.Options is not None else ():
        default = f.default_factory() if f.default_factory is not MISSING else f.default  # type: ignore[misc]
        keyed = "" if f.metadata.get("changes_numbers", True) else " [cannot change a number: not in the cache key]"
        rows.append((f.name, _type_name(hints[f.name]), "default none" if default is None else f"default {default!r}",
                     f.metadata.get("help", "") + keyed))
    return rows

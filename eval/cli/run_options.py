"""The options of ``evalita-eval run`` (its command is eval/cli/run.py), derived from the fields of ``RunSpec``
(eval/run_config.py), which declares each one once, with its type, default and help: an option here is a string handed
to the spec, which validates it. A removed engine flag is one line naming its ``--backend-arg`` spelling."""

from __future__ import annotations

import types
import typing
from typing import Any, Callable

import click

from ..run_config import REMOVED_FLAGS, RunSpec, removed_flag
from .support import backend_names


def task_help() -> str:
    from evalita_data.registry import task_ids

    return f" The registered tasks: {', '.join(task_ids())}."


# Help that only the registries know when the command is built.
MORE_HELP: dict[str, Callable[[], str]] = {
    "tasks": task_help, "backend": lambda: f" The registered backends: {', '.join(backend_names())}."}


def _base(annotation: Any) -> Any:
    """The type of a field's values: ``int`` of ``int | None``, the Literal itself."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    return args[0] if optional and len(args) == 1 else annotation


def spec_option(name: str) -> click.Option:
    """The option of ``RunSpec``'s field ``name``: --name-with-dashes, a flag for a bool that is off unless
    given (--x/--no-x when unset means 'decided by the run'), else a value the spec parses."""
    field = RunSpec.model_fields[name]
    extra = field.json_schema_extra or {}
    flag = extra.get("flag") or "--" + name.replace("_", "-")
    help_text = (field.description or "") + (MORE_HELP[name]() if name in MORE_HELP else "")
    kind = _base(field.annotation)
    if kind is bool and "metavar" not in extra:
        if field.annotation is bool:
            return click.Option([flag, name], is_flag=True, default=False, help=help_text)
        return click.Option([f"{flag}/--no-{flag.removeprefix('--')}", name], default=None, help=help_text)
    if typing.get_origin(kind) is typing.Literal:
        metavar = "[" + "|".join(typing.get_args(kind)) + "]"
    else:
        metavar = extra.get("metavar") or {int: "INTEGER", float: "FLOAT"}.get(kind, "TEXT")
    shown = field.default if isinstance(field.default, str | int) and not isinstance(field.default, bool) else None
    # The default shown is the field's; an option not given is left out of the values (run.py spec_of).
    return click.Option([flag, name], type=click.STRING, default=shown, metavar=metavar, help=help_text,
                        multiple=name == "backend_args", show_default=shown is not None)


CONFIG_OPTION = click.Option(
    ["--config"], default=None, type=click.Path(dir_okay=False),
    help="A YAML or JSON file of run options (the keys of these options, underscores for dashes; backend_args: a "
         "mapping). Options given here override it. docs/evaluator.md.")


class RunCommand(click.Command):
    """``run``: the options of RunSpec; a removed engine flag stops it with the one line naming its --backend-arg."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        for arg in args:
            if arg.split("=", 1)[0] in REMOVED_FLAGS:
                raise click.UsageError(removed_flag(arg.split("=", 1)[0]), ctx)
        return super().parse_args(ctx, args)


def run_command(callback: Callable) -> click.Command:
    """The ``run`` command of ``callback`` (which takes the context and every option by its field's name)."""
    params = [CONFIG_OPTION] + [spec_option(name) for name in RunSpec.model_fields]
    return RunCommand("run", callback=click.pass_context(callback), params=params, help=callback.__doc__)

"""``evalita-eval run``: its options, derived from ``RunSpec``'s fields (eval/run_config.py, which validates them;
a removed engine flag is one line naming its ``--backend-arg``), and ``--config FILE``; its inputs checked before the
model loads, each bad one a line naming the option; and the run: backend loaded, folder locked, plan announced, run."""

from __future__ import annotations

import os
import signal
import sys
import types
import typing
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import click

from evalita_data.cli.errors import one_line

from .support import RUN_NEEDS, backend_names, check_model_name, default_device, require
from ..config_file import ConfigFileError
from ..naming import NAME_FIELD, display_name
from ..run_config import (REMOVED_FLAGS, RunSpec, RunSpecError, backend_options, build_spec, cli_values,
                          read_config_file, removed_flag)
from ..sweep import FOLDER_FILE_ENV


def task_help() -> str:
    from evalita_data.registry import task_ids

    return f" The registered tasks: {', '.join(task_ids())}."


# Help that only the registries know when the command is built.
MORE_HELP: dict[str, Callable[[], str]] = {
    "tasks": task_help, "backend": lambda: f" The registered backends: {', '.join(backend_names())}."}


def spec_option(name: str) -> click.Option:
    """The option of ``RunSpec``'s field ``name``: --name-with-dashes, a flag for a bool that is off unless
    given (--x/--no-x when unset means 'decided by the run'), else a value the spec parses."""
    field = RunSpec.model_fields[name]
    extra = field.json_schema_extra or {}
    flag = extra.get("flag") or "--" + name.replace("_", "-")
    help_text = (field.description or "") + (MORE_HELP[name]() if name in MORE_HELP else "")
    # The type of the field's values: ``int`` of ``int | None``, the Literal itself.
    args = [a for a in typing.get_args(field.annotation) if a is not type(None)]
    optional = typing.get_origin(field.annotation) in (typing.Union, types.UnionType)
    kind = args[0] if optional and len(args) == 1 else field.annotation
    if kind is bool and "metavar" not in extra:
        if field.annotation is bool:
            return click.Option([flag, name], is_flag=True, default=False, help=help_text)
        return click.Option([f"{flag}/--no-{flag.removeprefix('--')}", name], default=None, help=help_text)
    if typing.get_origin(kind) is typing.Literal:
        metavar = "[" + "|".join(typing.get_args(kind)) + "]"
    else:
        metavar = extra.get("metavar") or {int: "INTEGER", float: "FLOAT"}.get(kind, "TEXT")
    shown = field.default if isinstance(field.default, str | int) and not isinstance(field.default, bool) else None
    # The default shown is the field's; an option not given is left out of the values (spec_of).
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


def entries_and_prompts(tasks: list[str] | None, prompt_names: list[str] | None, setting: str) -> list:
    """The entries of --tasks, checked with --prompts against the registry (every template compiled) before any model
    work; the prompts known are those each task kind declares under --setting (running/task_kinds.py)."""
    from evalita_data.prompts import PromptError

    from ..running.task_kinds import task_kind
    from ..sources.entries import select_entries

    try:
        entries = select_entries(tasks)
    except KeyError as err:
        raise click.BadParameter(err.args[0], param_hint="--tasks") from None
    try:
        for entry in entries:
            entry.compiled  # every template checked against the schema before any model work
    except PromptError as err:
        raise click.ClickException(str(err)) from err
    if prompt_names:
        known = {name for e in entries for name in task_kind(e, setting).declared_prompts()}
        unknown = sorted(set(prompt_names) - known)
        if unknown:
            raise click.BadParameter(f"unknown prompt(s) {', '.join(unknown)}; the tasks have "
                                     f"{', '.join(sorted(known))}", param_hint="--prompts")
    return entries


def check_data_dir(data_dir: str | None) -> None:
    """--data named a local folder that is no build (the raw originals, a typo): refused in a second, before torch,
    datasets and the model load (issue 40: `--data raw` took 45-55 s to fail)."""
    from ..sources.folder import check_data_folder
    from ..sources.official import is_official

    if data_dir is None or is_official(data_dir):
        return
    if not Path(data_dir).is_dir():
        raise click.BadParameter(f"{data_dir!r} is not a folder (nor hf:ORG)", param_hint="--data")
    try:
        check_data_folder(Path(data_dir))
    except FileNotFoundError as err:
        raise click.ClickException(one_line(err)) from None


def open_data(data_dir: str | None, hub_org: str | None):
    """The data source of --data / --hub-org (``check_data_dir`` passed first), or a one-line error."""
    from ..sources import open_source
    from ..sources.official import is_official

    try:
        return open_source(data_dir, hub_org)
    except ValueError as err:
        if is_official(data_dir):
            raise click.BadParameter(str(err), param_hint="--data") from None
        raise click.ClickException(one_line(err)) from None
    except FileNotFoundError as err:
        raise click.ClickException(one_line(err)) from None


def check_data(entries: list, source, config) -> None:
    """Before the model loads: the entries the run evaluates (running/plan.py select, the decisions the runner and the
    plan read), every evaluation split read and verified, and nothing to evaluate refused."""
    from ..settings.constrained import refuse_unformatted
    from ..running.plan import eval_split, nothing_evaluated, select
    from ..running.task_kinds import task_kind

    try:
        if config.constrained and not config.skip_missing:  # named tasks: refused now (a run over all warns)
            refuse_unformatted([e.name for e in entries if task_kind(e, config.setting).unformatted])
        selection = select(entries, source, config)
        for entry in selection.runnable:
            source.load(entry, eval_split(entry, config))
    except (FileNotFoundError, ValueError) as err:
        raise click.ClickException(one_line(err)) from None
    # nothing to evaluate: say why, before loading the model
    if selection.missing and len(selection.missing) == len(entries):
        for name, why in selection.missing.items():
            click.echo(f"{name}: skipped, {' '.join(why.split())}", err=True)
        raise click.ClickException(nothing_evaluated(selection.missing, source))


@contextmanager
def folder_lock(out: Path) -> Iterator[None]:
    """Hold ``OUT/.run.lock`` (filelock) while the run computes: two processes (two sweeps, a sweep and a `run`) never
    compute one folder at once; the second stops with one line and exit code 75."""
    from filelock import FileLock, Timeout

    from ..running.identity import LOCKED, RUN_LOCK

    out.mkdir(parents=True, exist_ok=True)
    try:
        held = FileLock(out / RUN_LOCK, blocking=False).acquire()
    except Timeout:
        click.echo(f"Error: {out} is being run by another process (another sweep or run): not started", err=True)
        sys.exit(LOCKED)
    with held:
        yield


def execute(options, source, spec, entries: list):
    """Load the backend, name the output folder by the run's identity (unless --output-dir), announce the plan and run
    it; (the RunResult, the Runner). Ctrl-C: what was kept, exit 130."""
    from ..replicas import create_backend  # the backend, or its replicas on Ray (data_parallel_size)
    from ..running.estimate import announce
    from ..running.identity import default_output_dir, run_identity
    from ..running.runner import ModelInfo, Runner
    from ..running.thinking_run import budget_line, refuse_thinking_without_traces

    runner = None
    try:
        backend = create_backend(spec.backend, options)
        try:
            refuse_thinking_without_traces(backend, spec)  # before the folder and the plan
            model_info = ModelInfo(options.model, options.revision, backend.dtype, spec.backend,
                                   backend.cache_identity(), spec.model_name)
            # Named by the model and the run's identity unless given: two runs never share one.
            output_dir = spec.output_dir or str(default_output_dir(run_identity(model_info.record, spec, backend)))
            split = f" (split {spec.split}: not comparable with the paper)" if spec.split else ""
            click.echo(f"writing to {output_dir}{split}", err=True)
            if os.environ.get(FOLDER_FILE_ENV):
                Path(os.environ[FOLDER_FILE_ENV]).write_text(str(Path(output_dir).resolve()), "utf-8")
            with folder_lock(Path(output_dir)):
                runner = Runner(backend, model_info, source, spec, output_dir, echo=click.echo)
                # Without a terminal (no progress bars) the estimate is a progress line for the logs, once a minute.
                plan = runner.plan(entries)  # built once: printed, then executed
                announce(runner, plan, backend, lambda text: click.echo(text, err=True),
                         every_s=300.0 if spec.progress else 60.0)
                if spec.thinking:
                    click.echo(budget_line(spec.max_thinking_tokens), err=True)
                return runner.run(plan), runner
        finally:
            backend.close()
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C (during the summary or the shutdown) is quiet
        kept = runner.interrupt_summary() if runner is not None else "nothing was computed yet"
        click.echo("\ninterrupted: " + kept, err=True)
        sys.exit(130)
    except (FileNotFoundError, ValueError, RuntimeError, OSError) as err:
        # Bad data folder, missing split, data differing from their manifest, too few few-shot examples, no chat
        # template, no CUDA, a model folder that is not a model, a request kind the backend cannot serve...
        raise click.ClickException(one_line(err)) from err


def spec_of(ctx: click.Context, given: dict):
    """The run's ``RunSpec`` (eval/run_config.py): --config FILE's keys, overridden by the options given on the command
    line; one line naming the file (or the option) and the key otherwise."""
    from click.core import ParameterSource

    config = given.pop("config")
    explicit = {p for p in given if ctx.get_parameter_source(p) not in (ParameterSource.DEFAULT, None)}
    try:
        values = cli_values(given, explicit, read_config_file(config) if config else {})
        spec, notes = build_spec(values, str(config) if config else None,  # None: the options name themselves
                                 frozenset(explicit), frozenset(a.split("=", 1)[0] for a in given["backend_args"]))
    except (RunSpecError, ConfigFileError) as err:
        if config is None:  # a bad option, as click's own errors: usage, exit 2
            raise click.UsageError(str(err)) from None
        raise click.ClickException(str(err)) from None
    for note in notes:
        click.echo(note, err=True)
    return spec


def _run(ctx: click.Context, **given) -> None:
    """Evaluate MODEL on every task and prompt; rerun the same command to resume."""
    require("run", RUN_NEEDS)
    run_spec(spec_of(ctx, given))


# The options of RunSpec's fields, each taken by its field's name.
run = RunCommand("run", callback=click.pass_context(_run), help=_run.__doc__,
                 params=[CONFIG_OPTION] + [spec_option(name) for name in RunSpec.model_fields])


def run_spec(spec) -> None:
    """``run`` of a checked ``RunSpec``: its inputs checked before the model loads, the run, its tables."""
    from ..running.console import run_counts, summary_table, task_summary_table
    from ..running.plan import nothing_evaluated

    check_data_dir(spec.data)  # before any heavy import: a wrong folder fails at once
    check_model_name(spec.model, tuple(f"{k}={v}" for k, v in spec.backend_args.items() if v is not None))
    progress = sys.stderr.isatty() if spec.progress is None else spec.progress
    # The spec the run reads: its device and whether it shows progress bars decided.
    spec = spec.model_copy(update={"device": spec.device or default_device(), "progress": progress})
    entries = entries_and_prompts(spec.tasks, spec.prompts, spec.setting)
    source = open_data(spec.data, spec.hub_org)
    check_data(entries, source, spec)
    result, runner = execute(backend_options(spec, spec.device), source, spec, entries)
    if result.record.status == "empty":  # every task skipped by the runner (e.g. none declares the --setting's prompts)
        raise click.ClickException(nothing_evaluated(result.record.skipped, source))
    click.echo(f"model: {display_name({**runner.model.record, NAME_FIELD: spec.model_name})}")
    click.echo(summary_table(result.record.results))
    click.echo(task_summary_table(result.record.results, result.record.baselines))
    click.echo(run_counts(result, runner.cache.path, runner.out))

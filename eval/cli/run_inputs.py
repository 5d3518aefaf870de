"""The inputs of ``evalita-eval run`` (eval/cli/run.py), checked before the model loads: --tasks and --prompts against
the registry, --data / --hub-org, and the data the run would evaluate; each bad input one line naming the option."""

from __future__ import annotations

from pathlib import Path

import click

from evalita_data.cli.errors import one_line


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


def check_data(entries: list, source, config, named_tasks: bool) -> None:
    """Before the model loads: the entries the run evaluates (running/plan.py select, the decisions the runner and the
    plan read), every evaluation split read and verified, and nothing to evaluate refused."""
    from ..settings.constrained import refuse_unformatted
    from ..running.plan import eval_split, nothing_evaluated, select
    from ..running.task_kinds import task_kind

    try:
        if config.constrained and named_tasks:  # named tasks: refused before the model loads (a run over all warns)
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

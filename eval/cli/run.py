"""``evalita-eval run``: the run's typed ``RunSpec`` (eval/run_config.py) built from its options
(eval/cli/run_options.py) and ``--config FILE``, and the run itself: the backend loaded, the folder locked, the plan
announced and executed. Its inputs are checked by eval/cli/run_inputs.py before the model loads."""

from __future__ import annotations

import os
import signal
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import click

from evalita_data.cli.errors import one_line

from .run_inputs import check_data, check_data_dir, entries_and_prompts, open_data
from .run_options import run_command
from .support import RUN_NEEDS, check_model_name, default_device, require
from ..naming import NAME_FIELD, display_name
from ..sweep import FOLDER_FILE_ENV


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
    from ..running.identity import default_output_dir, identity_of
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
            output_dir = spec.output_dir or str(default_output_dir(identity_of(backend, model_info.record, spec)))
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

    from ..run_config import RunSpecError, build_spec, cli_values, read_config_file

    config = given.pop("config")
    explicit = {p for p in given if ctx.get_parameter_source(p) not in (ParameterSource.DEFAULT, None)}
    try:
        values = cli_values(given, explicit, read_config_file(config) if config else {})
        spec, notes = build_spec(values, str(config) if config else None,  # None: the options name themselves
                                 frozenset(explicit), frozenset(a.split("=", 1)[0] for a in given["backend_args"]))
    except RunSpecError as err:
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


run = run_command(_run)


def run_spec(spec) -> None:
    """``run`` of a checked ``RunSpec``: its inputs checked before the model loads, the run, its tables."""
    from ..run_config import backend_options
    from ..running.console import run_counts, summary_table, task_summary_table
    from ..running.plan import nothing_evaluated

    check_data_dir(spec.data)  # before any heavy import: a wrong folder fails at once
    check_model_name(spec.model, tuple(f"{k}={v}" for k, v in spec.backend_args.items() if v is not None))
    progress = sys.stderr.isatty() if spec.progress is None else spec.progress
    # The spec the run reads: its device and whether it shows progress bars decided.
    spec = spec.model_copy(update={"device": spec.device or default_device(), "progress": progress})
    entries = entries_and_prompts(spec.tasks, spec.prompts, spec.setting)
    source = open_data(spec.data, spec.hub_org)
    check_data(entries, source, spec, named_tasks=spec.tasks is not None)
    result, runner = execute(backend_options(spec, spec.device), source, spec, entries)
    if result.record.status == "empty":  # every task skipped by the runner (e.g. none declares the --setting's prompts)
        raise click.ClickException(nothing_evaluated(result.record.skipped, source))
    click.echo(f"model: {display_name({**runner.model.record, NAME_FIELD: spec.model_name})}")
    click.echo(summary_table(result.record.results))
    click.echo(task_summary_table(result.record.results, result.record.baselines))
    click.echo(run_counts(result, runner.cache.path, runner.out))

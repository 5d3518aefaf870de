"""``evalita-eval run``: the run configuration built from its options (eval/cli_run_options.py), and
the run itself: the backend loaded, the plan announced and executed. Its inputs are checked by
eval/cli_run_inputs.py before the model loads; eval/cli.py registers the command."""

from __future__ import annotations

import sys

import click

from evalita_data.cli_errors import one_line

from .cli_run_inputs import check_data, check_data_dir, entries_and_prompts, open_data
from .cli_run_options import run_options
from .cli_support import RUN_NEEDS, check_model_name, default_device, require


def execute(backend_name: str, options, source, config, entries: list, output_dir: str | None):
    """Load the backend, name the output folder by the run's identity (unless --output-dir), announce
    the plan and run it; (the RunResult, the Runner). Ctrl-C: what was kept, exit 130."""
    from .replicas import create_backend  # the backend, or its replicas on Ray (data_parallel_size)
    from .running.estimate import announce
    from .running.identity import default_output_dir, identity_of
    from .running.runner import ModelInfo, Runner

    runner = None
    try:
        backend = create_backend(backend_name, options)
        try:
            model_info = ModelInfo(options.model, options.revision, backend.dtype, backend_name, backend.cache_identity())
            if output_dir is None:  # named by the model and the run's identity: two runs never share one
                output_dir = str(default_output_dir(identity_of(backend, model_info.record, config)))
            click.echo(f"writing to {output_dir}" + (f" (split {config.split}: not comparable with the paper)" if config.split else ""), err=True)
            runner = Runner(backend, model_info, source, config, output_dir, echo=click.echo)
            # Without a terminal (no progress bars) the estimate is a progress line for the logs, once a minute.
            plan = runner.plan(entries)  # built once: printed, then executed
            announce(runner, plan, backend, lambda text: click.echo(text, err=True), every_s=300.0 if config.progress else 60.0)
            return runner.run(plan), runner
        finally:
            backend.close()
    except KeyboardInterrupt:
        click.echo("\ninterrupted: " + (runner.interrupt_summary() if runner is not None else "nothing was computed yet"), err=True)
        sys.exit(130)
    except (FileNotFoundError, ValueError, RuntimeError, OSError) as err:
        # Bad data folder, missing split, data differing from their manifest, too few few-shot
        # examples, no chat template, no CUDA, a model folder that is not a model,
        # a request kind the backend cannot serve (BackendUnsupported)...
        raise click.ClickException(one_line(err)) from err


@click.command()
@run_options
def run(model, revision, data_dir, hub_org, tasks, prompts, num_fewshot, limit, batch_size, max_memory, backend_name, max_batch_tokens, device, dtype,
        max_length, threads, tensor_parallel_size, data_parallel_size, gpu_memory_utilization, max_model_len, base_url, api_key_env,
        concurrency, timeout_s, max_retries, backend_args, apply_chat_template, trust_remote_code, max_new_tokens, seed, setting, constrained,
        system_instruction, fewshot_as_multiturn, eval_split, output_dir, overwrite, progress) -> None:
    """Evaluate MODEL on every task and prompt; rerun the same command to resume."""
    require("run", RUN_NEEDS)
    from .backend_support.options import options_from_cli
    from .running.console import run_counts, summary_table, task_summary_table
    from .running.runner import RunConfig
    from .running.selection import nothing_evaluated

    if (data_dir is None) == (hub_org is None):
        raise click.UsageError("give exactly one of --data DIR or --hub-org ORG")
    check_data_dir(data_dir)  # before any heavy import: a wrong folder fails at once
    check_model_name(model, backend_args)
    device = device or default_device()
    entries, prompt_names = entries_and_prompts(tasks, prompts, setting)
    import datasets

    datasets.disable_progress_bars()  # one bar per task and prompt is ours; theirs is noise here
    source = open_data(data_dir, hub_org)
    config = RunConfig(progress=sys.stderr.isatty() if progress is None else progress,
                       num_fewshot=num_fewshot, limit=limit, batch_size=batch_size, max_memory=max_memory, apply_chat_template=apply_chat_template,
                       seed=seed, device=device, prompts=prompt_names, max_new_tokens=max_new_tokens,
                       skip_missing=tasks is None, setting=setting, constrained=constrained,
                       system_instruction=system_instruction, fewshot_as_multiturn=fewshot_as_multiturn, split=eval_split,
                       overwrite=overwrite)
    check_data(entries, source, config, named_tasks=tasks is not None)
    try:
        options = options_from_cli(
            backend_args, model=model, revision=revision, device=device, dtype=dtype, batch_size=batch_size, max_memory=max_memory,
            trust_remote_code=trust_remote_code, max_length=max_length, max_batch_tokens=max_batch_tokens, threads=threads, seed=seed,
            tensor_parallel_size=tensor_parallel_size, data_parallel_size=data_parallel_size, gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len, base_url=base_url, api_key_env=api_key_env, concurrency=concurrency, timeout_s=timeout_s,
            max_retries=max_retries)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--backend-arg") from err
    result, runner = execute(backend_name, options, source, config, entries, output_dir)
    if result.status == "empty":  # every task skipped by the runner (e.g. none declares the --setting's prompts)
        raise click.ClickException(nothing_evaluated(result.skipped, source))
    click.echo(summary_table(result.results))
    click.echo(task_summary_table(result.results, runner.baselines))
    click.echo(run_counts(result, runner.cache.path, runner.out))

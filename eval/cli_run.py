"""``evalita-eval run``: its options (the hidden ones are aliases of --backend-arg, documented in
docs/evaluator.md), the run configuration built from them, and the run itself: the backend loaded,
the plan announced and executed. Its inputs are checked by eval/cli_run_inputs.py before the model
loads; eval/cli.py registers the command."""

from __future__ import annotations

import sys

import click

from evalita_data.cli import RegistryChoice
from evalita_data.cli_errors import one_line

from .cli_run_inputs import check_data, entries_and_prompts, open_data, parse_batch_size, parse_max_memory, task_help
from .cli_support import RUN_NEEDS, backend_names, check_model_name, default_device, require


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
@click.option("--model", "model", required=True, help="Local folder or Hub id of a causal language model.")
@click.option("--revision", default=None, help="Model revision (branch, tag or commit) on the Hub.")
@click.option("--data", "data_dir", default=None,
              help="Local build folder (evalita-data build), a folder in the Hub layout, or hf:ORG for the "
                   "official Evalita-LLM splits on the Hub (hf:evalitahf, as lm-eval's evalita_llm tasks).")
@click.option("--hub-org", default=None, help="Read the datasets <ORG>/<task> from the Hub instead of --data.")
@click.option("--tasks", default=None, help=task_help())
@click.option("--prompts", default=None, help="Comma-separated prompt names (e.g. p1,p3). Default: every prompt.")
@click.option("--num-fewshot", default=0, show_default=True, type=click.IntRange(min=0), help="Few-shot examples per prompt.")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="Evaluate only the first N documents of each task.")
@click.option("--batch-size", default="8", show_default=True, callback=lambda ctx, param, value: parse_batch_size(value),
              help="Requests per batch (hf backend), or auto: batches sized by tokens to fit --max-memory (docs/evaluator.md).")
@click.option("--max-memory", default=None, callback=lambda ctx, param, value: parse_max_memory(value),
              help="Memory one forward pass may take, e.g. 4GiB (--batch-size auto; fast: its token budgets). "
                   "Default: 80% of the free GPU memory on CUDA, 1GiB on CPU.")
@click.option("--backend", "backend_name", default="hf", show_default=True, type=RegistryChoice(backend_names),
              help="The engine (the modules of evalita_eval/backends/ and the evalita_llm.backends entry points of installed "
                   "packages register them; `evalita-eval backends` lists each one's options). hf: batched plain path, "
                   "parity-tested against lm-eval; fast: shared-prefix scoring with token-budget batches (same "
                   "log-likelihoods within 1e-6*|LL|+1e-5), see docs/fast.md.")
@click.option("--max-batch-tokens", default=None, type=click.IntRange(min=1), hidden=True,
              help="Alias of --backend-arg max_batch_tokens=N (fast).")
@click.option("--device", default=None,
              help="cpu, cuda, cuda:N, or auto: spread a model larger than one device over all GPUs (device_map=auto, needs accelerate). "
                   "Default: cuda when torch sees a GPU, else cpu.")
@click.option("--dtype", default="auto", show_default=True, type=click.Choice(["auto", "float32", "float16", "bfloat16"]))
@click.option("--max-length", default=None, type=click.IntRange(min=1), help="Context length in tokens; default: the model's own (lm-eval's rule).")
@click.option("--threads", default=None, type=click.IntRange(min=1), help="torch intra-op threads (CPU); default: torch's.")
# Engine options: aliases of --backend-arg NAME=VALUE, kept for the users who have them
# (docs/evaluator.md); hidden from --help, listed by `evalita-eval backends`.
@click.option("--tensor-parallel-size", default=1, type=click.IntRange(min=1), hidden=True, help="Alias of --backend-arg tensor_parallel_size=N (vllm).")
@click.option("--data-parallel-size", default=1, type=click.IntRange(min=1), hidden=True, help="Alias of --backend-arg data_parallel_size=N (vllm).")
@click.option("--gpu-memory-utilization", default=None, type=click.FloatRange(0, 1, min_open=True), hidden=True,
              help="Alias of --backend-arg gpu_memory_utilization=F (vllm).")
@click.option("--max-model-len", default=None, type=click.IntRange(min=1), hidden=True, help="Alias of --backend-arg max_model_len=N (vllm).")
@click.option("--base-url", default=None, hidden=True, help="Alias of --backend-arg base_url=URL (openai-*).")
@click.option("--api-key-env", default=None, hidden=True, help="Alias of --backend-arg api_key_env=NAME (openai-*).")
@click.option("--concurrency", default=4, type=click.IntRange(min=1), hidden=True, help="Alias of --backend-arg concurrency=N (openai-*).")
@click.option("--timeout", "timeout_s", default=120.0, type=click.FloatRange(min=0, min_open=True), hidden=True,
              help="Alias of --backend-arg timeout_s=S (openai-*).")
@click.option("--max-retries", default=5, type=click.IntRange(min=0), hidden=True, help="Alias of --backend-arg max_retries=N (openai-*).")
@click.option("--backend-arg", "backend_args", multiple=True, metavar="KEY=VALUE",
              help="An option of the chosen backend (repeatable), typed and checked: `evalita-eval backends` lists each "
                   "backend's options (e.g. base_url, concurrency for openai-*; tensor_parallel_size for vllm).")
@click.option("--apply-chat-template", is_flag=True, help="Render prompts with the tokenizer's chat template (instruction-tuned models).")
@click.option("--trust-remote-code", is_flag=True, help="Allow model code from the Hub to run (off by default).")
@click.option("--max-new-tokens", default=None, type=click.IntRange(min=1),
              help="Override the generative tasks' limit (256, lm-eval's default), e.g. for a quick check.")
@click.option("--seed", default=1234, show_default=True, help="Seed of the few-shot sampler (lm-eval's default).")
@click.option("--setting", default="loglikelihood", show_default=True, type=click.Choice(["loglikelihood", "ce", "ce-ni", "oe"]),
              help="How MC tasks are asked: log-likelihood of each choice, or a generated answer: ce (lettered options), "
                   "ce-ni (options without letters), oe (no options). See docs/settings.md.")
@click.option("--constrained", is_flag=True, help="Constrained decoding (xgrammar): answers limited to the choices or the task's output format.")
@click.option("--system-instruction", default=None, help="System instruction (as lm-eval's --system_instruction).")
@click.option("--fewshot-as-multiturn/--no-fewshot-as-multiturn", default=None,
              help="Few-shot examples as user/assistant turns (default with --apply-chat-template, as lm-eval) or in one user turn.")
@click.option("--split", "eval_split", default=None,
              help="Evaluate this split instead of the task's official one (e.g. dev for hs, train for rel); "
                   "recorded in results.json and marked 'not comparable with the paper' in reports and cards.")
@click.option("--output-dir", default=None, type=click.Path(file_okay=False),
              help="Where results.json, samples/ and the resume cache go. Default: "
                   "results/<model>[@revision]/<setting>[-constrained][-<k>shot][-<split>]-<run id>, the run id being a "
                   "hash of every input that can change a number; a folder holding another run's results is refused.")
@click.option("--overwrite", is_flag=True, help="Replace the results of another run in --output-dir (its resume cache is kept).")
@click.option("--progress/--no-progress", default=None, help="A progress bar per task (default: on a terminal only).")
def run(model, revision, data_dir, hub_org, tasks, prompts, num_fewshot, limit, batch_size, max_memory, backend_name, max_batch_tokens, device, dtype,
        max_length, threads, tensor_parallel_size, data_parallel_size, gpu_memory_utilization, max_model_len, base_url, api_key_env,
        concurrency, timeout_s, max_retries, backend_args, apply_chat_template, trust_remote_code, max_new_tokens, seed, setting, constrained,
        system_instruction, fewshot_as_multiturn, eval_split, output_dir, overwrite, progress) -> None:
    """Evaluate MODEL on every task and prompt; rerun the same command to resume."""
    require("run", RUN_NEEDS)
    from .modeling.options import options_from_cli
    from .running.console import run_counts, summary_table, task_summary_table
    from .running.runner import RunConfig
    from .running.selection import nothing_evaluated

    if (data_dir is None) == (hub_org is None):
        raise click.UsageError("give exactly one of --data DIR or --hub-org ORG")
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

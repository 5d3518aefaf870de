"""The ``evalita-eval`` command."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import click

from evalita_data.cli import RegistryChoice
from evalita_data.cli_errors import FriendlyGroup, one_line

from . import __version__

# What each command imports beyond the data toolkit's own dependencies.
RUN_NEEDS = ("torch", "transformers", "datasets", "numpy", "sklearn", "rouge_score")
STATS_NEEDS = ("numpy", "scipy", "matplotlib")


def require(command: str, modules: tuple[str, ...]) -> None:
    """Stop with an install hint, not a traceback, when the evaluator extra is missing."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise click.ClickException(
            f"`evalita-eval {command}` needs {', '.join(missing)}, which `pip install evalita-llm` alone does not "
            "install. Install the evaluator: pip install torch 'evalita-llm[eval]' (from a checkout: pip install torch '.[eval]')."
        )


def check_model_name(model: str, backend_args: tuple[str, ...] = ()) -> None:
    """--model checked before anything heavy (model_path.py): one line saying what to pass."""
    from .model_path import ModelPathError, check_model_path

    try:
        check_model_path(model, backend_args)
    except ModelPathError as err:
        if err.usage:
            raise click.BadParameter(str(err), param_hint="--model") from None
        raise click.ClickException(str(err)) from None


def default_device() -> str:
    """``--device`` when none is given: the GPU when torch sees one, else the CPU. (``auto`` is
    not this: it spreads one model over every device with accelerate's device_map.)"""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _batch_size(value: str) -> int | None:
    """--batch-size: a positive count, or auto (None: sized by tokens)."""
    if value == "auto":
        return None
    if not value.isdigit() or int(value) < 1:
        raise click.BadParameter(f"{value!r} is neither a positive integer nor auto", param_hint="--batch-size")
    return int(value)


def _memory_size(value: str | None) -> int | None:
    from .backend_support.memory import parse_memory

    try:
        return None if value is None else parse_memory(value)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--max-memory") from None


@click.group(cls=FriendlyGroup)
@click.version_option(__version__, prog_name="evalita-eval")
def main() -> None:
    """Evaluate language models on the Evalita-LLM tasks and report multi-prompt scores."""


# ---------------------------------------------------------------- run


def _backend_names() -> list[str]:
    from .backends import backend_names

    try:
        return backend_names()
    except ImportError:
        require("run", RUN_NEEDS)  # a missing evaluator extra: the install hint
        raise


def _task_help() -> str:
    from evalita_data.registry import task_ids

    return ("Comma-separated task ids or entries (e.g. te,sa,ner or ner_fic); the registered tasks: "
            f"{', '.join(task_ids())}. Default: every task the data have.")


def _entries_and_prompts(tasks: str | None, prompts: str | None, setting: str) -> tuple[list, list[str] | None]:
    """--tasks and --prompts checked against the registry (every template compiled) before any model work."""
    from evalita_data.prompts import PromptError

    from .sources.entries import select_entries

    split = lambda s: [x.strip() for x in s.split(",") if x.strip()] if s else None  # noqa: E731
    try:
        entries = select_entries(split(tasks))
    except KeyError as err:
        raise click.BadParameter(err.args[0], param_hint="--tasks") from None
    try:
        for entry in entries:
            entry.compiled  # every template checked against the schema before any model work
    except PromptError as err:
        raise click.ClickException(str(err)) from err
    prompt_names = split(prompts)
    if prompt_names:
        known = {p.name for e in entries for p in e.spec.prompts} if setting == "loglikelihood" else {"p1", "p2"}
        unknown = sorted(set(prompt_names) - known)
        if unknown:
            raise click.BadParameter(f"unknown prompt(s) {', '.join(unknown)}; the tasks have {', '.join(sorted(known))}", param_hint="--prompts")
    return entries, prompt_names


def _open_data(data_dir: str | None, hub_org: str | None):
    """The data source of --data / --hub-org, or a one-line error."""
    from .sources import open_source
    from .sources.official import is_official

    if data_dir is not None and not is_official(data_dir) and not Path(data_dir).is_dir():
        raise click.BadParameter(f"{data_dir!r} is not a folder (nor hf:ORG)", param_hint="--data")
    try:
        return open_source(data_dir, hub_org)
    except ValueError as err:
        if is_official(data_dir):
            raise click.BadParameter(str(err), param_hint="--data") from None
        raise click.ClickException(one_line(err)) from None
    except FileNotFoundError as err:
        raise click.ClickException(one_line(err)) from None


def _check_data(entries: list, source, config, named_tasks: bool) -> None:
    """Before the model loads: the entries the run evaluates (running/selection.py, the decisions the
    runner and the plan read), every evaluation split read and verified, and nothing to evaluate refused."""
    from .settings.constrained import refuse_unformatted
    from .running.selection import nothing_evaluated
    from .running.selection import select

    try:
        if config.constrained and named_tasks:  # named tasks: refused before the model loads (a run over all warns)
            refuse_unformatted([(e.name, e.spec) for e in entries])
        selection = select(entries, source, config)
        for entry in selection.runnable:
            source.load(entry, config.split or entry.spec.eval_split)
    except (FileNotFoundError, ValueError) as err:
        raise click.ClickException(one_line(err)) from None
    if selection.missing and len(selection.missing) == len(entries):  # nothing to evaluate: say why, before loading the model
        for name, why in selection.missing.items():
            click.echo(f"{name}: skipped, {' '.join(why.split())}", err=True)
        raise click.ClickException(nothing_evaluated(selection.missing, source))


def _execute(backend_name: str, options, source, config, entries: list, output_dir: str | None):
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


@main.command()
@click.option("--model", "model", required=True, help="Local folder or Hub id of a causal language model.")
@click.option("--revision", default=None, help="Model revision (branch, tag or commit) on the Hub.")
@click.option("--data", "data_dir", default=None,
              help="Local build folder (evalita-data build), a folder in the Hub layout, or hf:ORG for the "
                   "official Evalita-LLM splits on the Hub (hf:evalitahf, as lm-eval's evalita_llm tasks).")
@click.option("--hub-org", default=None, help="Read the datasets <ORG>/<task> from the Hub instead of --data.")
@click.option("--tasks", default=None, help=_task_help())
@click.option("--prompts", default=None, help="Comma-separated prompt names (e.g. p1,p3). Default: every prompt.")
@click.option("--num-fewshot", default=0, show_default=True, type=click.IntRange(min=0), help="Few-shot examples per prompt.")
@click.option("--limit", default=None, type=click.IntRange(min=1), help="Evaluate only the first N documents of each task.")
@click.option("--batch-size", default="8", show_default=True, callback=lambda ctx, param, value: _batch_size(value),
              help="Requests per batch (hf backend), or auto: batches sized by tokens to fit --max-memory (docs/evaluator.md).")
@click.option("--max-memory", default=None, callback=lambda ctx, param, value: _memory_size(value),
              help="Memory one forward pass may take, e.g. 4GiB (--batch-size auto; fast: its token budgets). "
                   "Default: 80% of the free GPU memory on CUDA, 1GiB on CPU.")
@click.option("--backend", "backend_name", default="hf", show_default=True, type=RegistryChoice(_backend_names),
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
    from .backend_support.options import options_from_cli
    from .running.console import run_counts, summary_table, task_summary_table
    from .running.runner import RunConfig
    from .running.selection import nothing_evaluated

    if (data_dir is None) == (hub_org is None):
        raise click.UsageError("give exactly one of --data DIR or --hub-org ORG")
    check_model_name(model, backend_args)
    device = device or default_device()
    entries, prompt_names = _entries_and_prompts(tasks, prompts, setting)
    import datasets

    datasets.disable_progress_bars()  # one bar per task and prompt is ours; theirs is noise here
    source = _open_data(data_dir, hub_org)
    config = RunConfig(progress=sys.stderr.isatty() if progress is None else progress,
                       num_fewshot=num_fewshot, limit=limit, batch_size=batch_size, max_memory=max_memory, apply_chat_template=apply_chat_template,
                       seed=seed, device=device, prompts=prompt_names, max_new_tokens=max_new_tokens,
                       skip_missing=tasks is None, setting=setting, constrained=constrained,
                       system_instruction=system_instruction, fewshot_as_multiturn=fewshot_as_multiturn, split=eval_split,
                       overwrite=overwrite)
    _check_data(entries, source, config, named_tasks=tasks is not None)
    try:
        options = options_from_cli(
            backend_args, model=model, revision=revision, device=device, dtype=dtype, batch_size=batch_size, max_memory=max_memory,
            trust_remote_code=trust_remote_code, max_length=max_length, max_batch_tokens=max_batch_tokens, threads=threads, seed=seed,
            tensor_parallel_size=tensor_parallel_size, data_parallel_size=data_parallel_size, gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len, base_url=base_url, api_key_env=api_key_env, concurrency=concurrency, timeout_s=timeout_s,
            max_retries=max_retries)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--backend-arg") from err
    result, runner = _execute(backend_name, options, source, config, entries, output_dir)
    if result.status == "empty":  # every task skipped by the runner (e.g. none declares the --setting's prompts)
        raise click.ClickException(nothing_evaluated(result.skipped, source))
    click.echo(summary_table(result.results))
    click.echo(task_summary_table(result.results, runner.baselines))
    click.echo(run_counts(result, runner.cache.path, runner.out))


@main.command()
def backends() -> None:
    """List the backends (built-in and installed through the evalita_llm.backends entry point) and each one's
    options, given to `run` as --backend-arg NAME=VALUE."""
    from .backend_support.options import options_table
    from .backends import get_backend_class

    for name in _backend_names():
        cls = get_backend_class(name)
        doc = (cls.__doc__ or "").strip().splitlines()
        click.echo(f"{name}  ({cls.__module__}.{cls.__qualname__})" + (f": {doc[0]}" if doc else ""))
        click.echo(options_table(cls))


@main.command()
@click.argument("sweep_file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), default=Path("sweep-report"), show_default=True,
              help="Folder of the one report of every complete run (as `evalita-eval report`).")
@click.option("--ray-address", default=None, help="A running Ray cluster (e.g. HEAD:6379); default: a local Ray for the sweep.")
def sweep(sweep_file: Path, out: Path, ray_address: str | None) -> None:
    """Run every run of SWEEP_FILE (YAML/JSON list: model, backend, backend_args, setting, tasks...) as Ray tasks,
    each into its own run folder; rerun to resume; then one report of them all (docs/parallel.md)."""
    require("sweep", RUN_NEEDS + STATS_NEEDS)
    from .sweep import load_sweep, report_sweep

    try:
        runs = load_sweep(sweep_file)
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    if importlib.util.find_spec("ray") is None:
        raise click.ClickException("`evalita-eval sweep` runs on Ray, which is not installed: pip install 'evalita-llm[ray]'")
    failed = report_sweep(runs, out, ray_address, click.echo)
    if failed:
        raise click.ClickException(f"{failed} of {len(runs)} runs failed (see each one's sweep.log); rerun the sweep to resume them")


# ---------------------------------------------------------------- aggregate / report


@main.command()
@click.argument("scores", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--scale", type=click.Choice(["auto", "percent", "fraction"]), default="auto", show_default=True,
              help="Scale of the scores; auto = percent if any score is above 1. Output keeps the input's scale.")
@click.option("--alpha", type=float, default=1.0, show_default=True, help="Variance penalty of the Sharpe score.")
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), default=Path("aggregate"),
              show_default=True, help="Folder for aggregate.md and aggregate.json.")
def aggregate(scores: Path, scale: str, alpha: float, out: Path) -> None:
    """Paper-style tables (MinP/MaxP/AvgP/CPS, Sharpe) from a CSV/JSON of (model, task, prompt, score) rows."""
    require("aggregate", STATS_NEEDS)
    from .reporting.aggregate import run_aggregate

    try:
        text = run_aggregate(scores, out, scale, alpha)  # type: ignore[arg-type]
    except ValueError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(1)
    click.echo(text)
    click.echo(f"written: {out / 'aggregate.md'}, {out / 'aggregate.json'}", err=True)


@main.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True))
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), default=Path("report"),
              show_default=True, help="Folder for report.md, report.html, report.json and plots/.")
@click.option("--bootstrap", "k", type=click.IntRange(min=0), default=100, show_default=True,
              help="Bootstrap resamples of the test items for CIs and the mean rank score (0: none).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap resampling.")
@click.option("--alpha", type=float, default=1.0, show_default=True, help="Variance penalty of the Sharpe score.")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: on a terminal only).")
@click.option("--partial", is_flag=True, help="Report the finished tasks of unfinished runs (marked 'partial run: N of M tasks finished').")
def report(results: tuple[Path, ...], out: Path, k: int, seed: int, alpha: float, progress: bool | None, partial: bool) -> None:
    """Markdown + HTML report with plots from results.json files or run folders of `evalita-eval run`, or lm-eval output folders."""
    require("report", STATS_NEEDS)
    from .reporting.report import write_report

    if progress is None:
        progress = sys.stderr.isatty()
    try:
        written = write_report(list(results), out, k=k, seed=seed, alpha=alpha, progress=progress, echo=click.echo, partial=partial)
    except ValueError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(1)
    click.echo("written: " + ", ".join(str(p) for p in written))


@main.command()
@click.argument("run_a", type=click.Path(path_type=Path, exists=True))
@click.argument("run_b", type=click.Path(path_type=Path, exists=True))
@click.option("--bootstrap", "k", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Paired bootstrap resamples (F1 and ROUGE metrics; accuracies use the exact McNemar test).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the paired bootstrap.")
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Also write compare.md and compare.json into this folder.")
def compare(run_a: Path, run_b: Path, k: int, seed: int, out: Path | None) -> None:
    """Per task and prompt, A minus B with a paired test on the same items (results.json, run folders, lm-eval output folders)."""
    require("compare", STATS_NEEDS)
    from .reporting.compare import write_comparison
    from .reporting.tables import ScoresError

    try:
        click.echo(write_comparison(run_a, run_b, out, k=k, seed=seed))
    except ScoresError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(1)


# ---------------------------------------------------------------- push-results / export-lm-eval


@main.command("push-results")
@click.argument("results_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--repo", "repo_id", required=True, help="Hub dataset ORG/NAME to publish to (created if missing).")
@click.option("--private", is_flag=True, help="Create the repository as private.")
@click.option("--revision", default="main", show_default=True, help="Branch to commit to (created from main if missing).")
@click.option("--message", default=None, help="Commit message.")
@click.option("--dry-run", is_flag=True, help="Show the files and what would change; commit nothing.")
@click.option("--to-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Write the repository layout to DIR instead of the Hub (offline).")
def push_results(results_dir: Path, repo_id: str, private: bool, revision: str, message: str | None, dry_run: bool,
                 to_dir: Path | None) -> None:
    """Publish RESULTS_DIR (results.json, samples/ and a card with the per-task tables) as a Hub dataset, one commit.

    Nothing is deleted; the token comes from HF_TOKEN or the stored login and is never printed."""
    require("push-results", STATS_NEEDS)
    from evalita_data.errors import EvalitaDataError

    from .publishing.push_results import push_results as run_push
    from .reporting.tables import ScoresError

    try:
        run_push(results_dir, repo_id, private=private, revision=revision, message=message, dry_run=dry_run,
                 to_dir=to_dir, echo=click.echo)
    except (EvalitaDataError, ScoresError) as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(1)


@main.command("export-lm-eval")
@click.argument("out_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--org", default=None, help="Read the datasets ORG/<task> from the Hub (as `evalita-data push` publishes them).")
@click.option("--data-dir", type=click.Path(path_type=Path, exists=True, file_okay=False), default=None,
              help="Read the datasets from DIR/<task>, a folder written by `evalita-data push --to-dir DIR`.")
@click.option("--official", is_flag=True,
              help="Read the Evalita-LLM copies ORG/<dataset> with their split names (--org evalitahf), as `run --data hf:ORG`.")
def export_lm_eval(out_dir: Path, org: str | None, data_dir: Path | None, official: bool) -> None:
    """Write lm-evaluation-harness task YAMLs (a group per task, a task per task x prompt) and their utils.py.

    Run them with: lm_eval --include_path OUT_DIR --tasks evalita-llm (or evalita-llm_<task>)."""
    from .publishing.export_lm_eval import export

    if (org is None) == (data_dir is None):
        raise click.UsageError("give exactly one of --org ORG or --data-dir DIR")
    try:
        export(out_dir, org=org, data_dir=data_dir, official=official, echo=click.echo)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--org") from None



@main.command("export-eee")
@click.argument("run_dir", type=click.Path(path_type=Path, exists=True))
@click.argument("out_dir", type=click.Path(path_type=Path, file_okay=False), default=Path("eee"))
@click.option("--organization", default="unknown", show_default=True, help="Who ran the evaluation (source_organization_name).")
def export_eee(run_dir: Path, out_dir: Path, organization: str) -> None:
    """Write RUN_DIR (results.json and samples/) in the Every Eval Ever schema: aggregate JSON and instance-level JSONL,
    validated against the schemas kept in the package, under OUT_DIR/data/evalita-llm/<developer>/<model>/."""
    require("export-eee", STATS_NEEDS)
    from .publishing.export_eee import export_eee as run_export

    try:
        written = run_export(run_dir, out_dir, organization)
    except ValueError as err:  # ScoresError included: a results.json that cannot be read
        click.echo(f"error: {err}", err=True)
        sys.exit(1)
    click.echo("written: " + ", ".join(str(p) for p in written))

if __name__ == "__main__":
    main()

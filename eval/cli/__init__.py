"""The ``evalita-eval`` command: the table of its subcommands. ``run`` lives in eval/cli/run.py (with its options and
input checks); what the commands share in eval/cli/support.py. ``python -m evalita_eval.cli`` runs it (__main__.py)."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import click

from evalita_data.cli.errors import FriendlyGroup

from .. import __version__
from .run import run as run_command
from .support import RUN_NEEDS, STATS_NEEDS, backend_names, require


@click.group(cls=FriendlyGroup)
@click.version_option(__version__, prog_name="evalita-eval")
def main() -> None:
    """Evaluate language models on the Evalita-LLM tasks and report multi-prompt scores."""


main.add_command(run_command)


@main.command()
def backends() -> None:
    """List the backends (built-in and installed through the evalita_llm.backends entry point) and each one's
    options, given to `run` as --backend-arg NAME=VALUE."""
    from ..backend_support.options import option_rows
    from ..backends import get_backend_class
    from ..running.console import columns

    for name in backend_names():
        cls = get_backend_class(name)
        doc = (cls.__doc__ or "").strip().splitlines()
        click.echo(f"{name}  ({cls.__module__}.{cls.__qualname__})" + (f": {doc[0]}" if doc else ""))
        rows = option_rows(cls)
        click.echo(textwrap.indent(columns(rows, text={0, 1, 2, 3}), "    ") if rows else "    no options of its own")


@main.command()
@click.argument("sweep_file", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), default=Path("sweep-report"),
              show_default=True, help="Folder of the one report of every complete run (as `evalita-eval report`).")
@click.option("--ray-address", default=None,
              help="A running Ray cluster (e.g. HEAD:6379); default: a local Ray for the sweep.")
def sweep(sweep_file: Path, out: Path, ray_address: str | None) -> None:
    """Run every run of SWEEP_FILE (YAML/JSON list: model, backend, backend_args, setting, tasks...) as Ray tasks,
    each into its own run folder; rerun to resume; then one report of them all (docs/parallel.md)."""
    require("sweep", RUN_NEEDS + STATS_NEEDS)
    from ..sweep import report_sweep
    from ..sweep_runs import load_sweep

    try:
        runs = load_sweep(sweep_file)
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    if importlib.util.find_spec("ray") is None:
        raise click.ClickException("`evalita-eval sweep` runs on Ray, which is not installed: pip install -e '.[ray]' "
                                   "(in a clone of evalita-llm)")
    from ..replicas.resources import NotEnoughResources

    try:
        failed = report_sweep(runs, out, ray_address, click.echo)
    except NotEnoughResources as err:
        raise click.ClickException(f"{sweep_file}: {err}") from None
    if failed:
        raise click.ClickException(f"{failed} of {len(runs)} runs failed (see each one's log in {out / 'logs'}); rerun "
                                   "the sweep to resume them")


@contextmanager
def exit_1_on(*errors: type[Exception]) -> Iterator[None]:
    """One of ``errors`` raised: ``error: MESSAGE`` on stderr and exit code 1."""
    try:
        yield
    except errors as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(1)


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
    from ..reporting.tables import run_aggregate

    with exit_1_on(ValueError):
        text = run_aggregate(scores, out, scale, alpha)  # type: ignore[arg-type]
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
@click.option("--partial", is_flag=True,
              help="Report the finished tasks of unfinished runs (marked 'partial run: N of M tasks finished').")
def report(results: tuple[Path, ...], out: Path, k: int, seed: int, alpha: float, progress: bool | None,
           partial: bool) -> None:
    """Markdown + HTML report with plots from results.json files or run folders of `evalita-eval run`, or lm-eval
    output folders (one run each: a folder holding several is named by its run's results_<time>.json)."""
    require("report", STATS_NEEDS)
    from ..reporting.report import write_report

    with exit_1_on(ValueError):
        written = write_report(list(results), out, k=k, seed=seed, alpha=alpha, partial=partial,
                               progress=sys.stderr.isatty() if progress is None else progress)
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
    """Per task and prompt, A minus B with a paired test on the same items (results.json, run folders, lm-eval
    output folders or one lm-eval run's results_<time>.json)."""
    require("compare", STATS_NEEDS)
    from ..reporting.compare import write_comparison
    from ..record import RecordError

    with exit_1_on(RecordError):
        click.echo(write_comparison(run_a, run_b, out, k=k, seed=seed))


# --model-name of push-results and export-eee.
MODEL_NAME = click.option("--model-name", default=None, help=(
    "Name the model so in every published file (default: model.name of results.json, else the Hub id or a local "
    "folder's name and weights hash)."))


def _given_name(name: str | None) -> str | None:
    """A ``--model-name`` checked (naming.check_given_name), or None."""
    from ..naming import check_given_name

    try:
        return check_given_name(name) if name is not None else None
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--model-name") from None


@main.command("push-results")
@click.argument("results_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--repo", "repo_id", required=True, help="Hub dataset ORG/NAME to publish to (created if missing).")
@click.option("--private", is_flag=True, help="Create the repository as private.")
@click.option("--revision", default="main", show_default=True,
              help="Branch to commit to (created from main if missing).")
@click.option("--message", default=None, help="Commit message.")
@click.option("--dry-run", is_flag=True, help="Show the files and what would change; commit nothing.")
@click.option("--to-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Write the repository layout to DIR instead of the Hub (offline).")
@MODEL_NAME
def push_results(results_dir: Path, repo_id: str, private: bool, revision: str, message: str | None, dry_run: bool,
                 to_dir: Path | None, model_name: str | None) -> None:
    """Publish RESULTS_DIR (results.json, samples/ and a card with the per-task tables) as a Hub dataset, one commit.

    Nothing is deleted; the token comes from HF_TOKEN or the stored login and is never printed."""
    require("push-results", STATS_NEEDS)
    from evalita_data.errors import EvalitaDataError

    from ..publishing.push_results import push_results as run_push
    from ..record import RecordError

    with exit_1_on(EvalitaDataError, RecordError):
        run_push(results_dir, repo_id, private=private, revision=revision, message=message, dry_run=dry_run,
                 to_dir=to_dir, echo=click.echo, model_name=_given_name(model_name))


@main.command("export-lm-eval")
@click.argument("out_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--org", default=None,
              help="Read the datasets ORG/<task> from the Hub (as `evalita-data push` publishes them).")
@click.option("--data-dir", type=click.Path(path_type=Path, exists=True, file_okay=False), default=None,
              help="Read the datasets from DIR/<task>, a folder written by `evalita-data push --to-dir DIR`.")
@click.option("--official", is_flag=True,
              help="Read the Evalita-LLM copies ORG/<dataset> with their split names (--org evalitahf), as `run --data "
                   "hf:ORG`.")
def export_lm_eval(out_dir: Path, org: str | None, data_dir: Path | None, official: bool) -> None:
    """Write lm-evaluation-harness task YAMLs (a group per task, a task per task x prompt) and their utils.py.

    Run them with: lm_eval --include_path OUT_DIR --tasks evalita-llm (or evalita-llm_<task>)."""
    from ..publishing.export_lm_eval import export

    if (org is None) == (data_dir is None):
        raise click.UsageError("give exactly one of --org ORG or --data-dir DIR")
    try:
        export(out_dir, org=org, data_dir=data_dir, official=official, echo=click.echo)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--org") from None


@main.command("export-eee")
@click.argument("run_dir", type=click.Path(path_type=Path, exists=True))
@click.argument("out_dir", type=click.Path(path_type=Path, file_okay=False), default=Path("eee"))
@click.option("--organization", default="unknown", show_default=True,
              help="Who ran the evaluation (source_organization_name).")
@MODEL_NAME
def export_eee(run_dir: Path, out_dir: Path, organization: str, model_name: str | None) -> None:
    """Write RUN_DIR (results.json and samples/) in the Every Eval Ever schema: aggregate JSON and instance-level JSONL,
    validated against the schemas kept in the package, under OUT_DIR/data/evalita-llm/<developer>/<model>/."""
    require("export-eee", STATS_NEEDS)
    from ..publishing.export_eee import export_eee as run_export

    with exit_1_on(ValueError):  # RecordError included: a results.json that cannot be read
        written = run_export(run_dir, out_dir, organization, model_name=_given_name(model_name))
    click.echo("written: " + ", ".join(str(p) for p in written))

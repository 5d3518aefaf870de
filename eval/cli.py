"""The ``evalita-eval`` command."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__


@click.group()
@click.version_option(__version__, prog_name="evalita-eval")
def main() -> None:
    """Evaluate language models on the Evalita-LLM tasks and report multi-prompt scores."""


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
    from .aggregate import run_aggregate

    try:
        text = run_aggregate(scores, out, scale, alpha)  # type: ignore[arg-type]
    except ValueError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(1)
    click.echo(text)
    click.echo(f"written: {out / 'aggregate.md'}, {out / 'aggregate.json'}", err=True)


@main.command()
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), default=Path("report"),
              show_default=True, help="Folder for report.md, report.html, report.json and plots/.")
@click.option("--bootstrap", "k", type=click.IntRange(min=0), default=100, show_default=True,
              help="Bootstrap resamples of the test items for CIs and the mean rank score (0: none).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap resampling.")
@click.option("--alpha", type=float, default=1.0, show_default=True, help="Variance penalty of the Sharpe score.")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: on a terminal only).")
def report(results: tuple[Path, ...], out: Path, k: int, seed: int, alpha: float, progress: bool | None) -> None:
    """Markdown + HTML report with plots from one or more results.json of `evalita-eval run`."""
    from .report import write_report

    if progress is None:
        progress = sys.stderr.isatty()
    try:
        written = write_report(list(results), out, k=k, seed=seed, alpha=alpha, progress=progress, echo=click.echo)
    except ValueError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(1)
    click.echo("written: " + ", ".join(str(p) for p in written))


if __name__ == "__main__":
    main()

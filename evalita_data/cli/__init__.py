"""The ``evalita-data`` command (its one-line errors: evalita_data/cli/errors.py; ``python -m evalita_data.cli``:
evalita_data/cli/__main__.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Sequence

import click

from .. import __version__
from ..card import DEFAULT_ORG
from ..errors import EvalitaDataError
from ..manifest import MANIFEST_FILE
from ..registry import task_ids
from .errors import FriendlyGroup


class RegistryChoice(click.Choice):
    """A choice among the names a registry holds, read when the command runs (not at import)."""

    def __init__(self, names: Callable[[], Sequence[str]]) -> None:
        self._names = names
        super().__init__([])

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        return tuple(self._names())

    @choices.setter
    def choices(self, _value: object) -> None:
        pass


TASK_CHOICE = RegistryChoice(task_ids)


@click.group(cls=FriendlyGroup)
@click.version_option(__version__, prog_name="evalita-data")
def main() -> None:
    """Build, validate and publish the Evalita-LLM datasets from the original files."""


@main.command()
@click.option("--raw", "raw", type=click.Path(path_type=Path, file_okay=False), default=Path("raw"), show_default=True,
              help="Folder with one sub-folder of original files per task.")
@click.option("--out", "out", type=click.Path(path_type=Path, file_okay=False), default=Path("evalita-build"),
              show_default=True, help="Output folder: <task>/<split>.jsonl and manifest.json.")
@click.option("--task", "tasks", type=TASK_CHOICE, multiple=True,
              help="Task to build (repeatable, or several after one --task); default: every registered task.")
@click.option("--seed", type=int, default=None,
              help="Override the construction seed (FAQ distractors and letters, AT option order); "
                   "splits and the SUM sample use fixed seeds and do not change.")
@click.option("--progress/--no-progress", default=None, help="Progress bars (default: on a terminal only).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Processes converting tasks side by side (default: one per task, at most one per CPU).")
@click.argument("more_tasks", nargs=-1, type=TASK_CHOICE, metavar="[TASK]...")
def build(raw: Path, out: Path, tasks: tuple[str, ...], more_tasks: tuple[str, ...], seed: int | None,
          progress: bool | None, workers: int | None) -> None:
    """Convert raw/<task>/ originals into validated <out>/<task>/<split>.jsonl files.

    Tasks may be named with --task (repeatable) or as arguments:
    `evalita-data build --task faq at ls sum` builds those four.
    """
    from ..building.pipeline import build as run_build

    tasks = tuple(dict.fromkeys(tasks + more_tasks))  # keep order, drop repeats

    if progress is None:
        progress = sys.stderr.isatty()
    try:
        summary = run_build(raw, out, list(tasks) or None, seed=seed, progress=progress, echo=click.echo,
                            workers=workers)
    except (EvalitaDataError, FileNotFoundError) as err:
        click.echo(f"error: {err}", err=True)
        click.echo(f"build failed; {out} was left as it was.", err=True)
        sys.exit(1)
    missing = summary.not_built()
    if not summary.installed:  # a task asked for by name could not be built
        click.echo(f"{len(missing)} task(s) asked for not built: {', '.join(o.task for o in missing)} (see above for "
                   f"what is missing); nothing installed, {out} was left as it was")
        sys.exit(1)
    click.echo(f"built {len(summary.built())} task(s) into {out}; manifest: {out / MANIFEST_FILE}")
    if missing:  # the default 'all' builds what it can
        click.echo(f"{len(missing)} task(s) not built: {', '.join(o.task for o in missing)} (see above for what is "
                   "missing)")


@main.command()
@click.argument("path", type=click.Path(path_type=Path, exists=True))
@click.option("--task", type=TASK_CHOICE, default=None, help="Task of a single JSONL file, if its path does not say.")
def validate(path: Path, task: str | None) -> None:
    """Validate a build folder or one JSONL split against the task schemas."""
    from ..validate import validate_path

    try:
        violations, nfiles = validate_path(path, task)
    except (ValueError, EvalitaDataError) as err:  # a file it cannot tell the task of; a link leaving the build
        click.echo(f"error: {err}", err=True)
        sys.exit(2)
    for v in violations:
        click.echo(str(v))
    if nfiles == 0:
        click.echo(f"error: no split files found under {path}", err=True)
        sys.exit(1)
    if violations:
        click.echo(f"{len(violations)} problem(s) in {nfiles} file(s)", err=True)
        sys.exit(1)
    click.echo(f"ok: {nfiles} file(s) valid")


@main.command()
@click.argument("task", type=TASK_CHOICE)
@click.option("--build", "build_dir", type=click.Path(path_type=Path, file_okay=False), default=Path("evalita-build"),
              show_default=True, help="Build folder with manifest.json.")
@click.option("--org", default=DEFAULT_ORG, show_default=True,
              help="Hub organisation named in the card's usage example.")
def card(task: str, build_dir: Path, org: str) -> None:
    """Print the dataset card (README.md) that `push` publishes for TASK."""
    from ..hub.layout import split_path
    from ..card import render_card
    from ..building.pipeline import read_manifest
    from ..manifest import ManifestError
    from ..safepaths import check_hub_name

    try:
        check_hub_name(org)
    except EvalitaDataError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(1)
    try:
        entry = read_manifest(build_dir).tasks.get(task)
    except ManifestError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(1)
    if entry is None:
        click.echo(f"error: {task} is not in {build_dir / MANIFEST_FILE}; run 'evalita-data build --task {task}' "
                   "first", err=True)
        sys.exit(1)
    paths = {key: split_path(key, "parquet", "data") for key in entry.splits}
    click.echo(render_card(task, entry, paths, org), nl=False)


@main.command()
@click.option("--build", "build_dir", type=click.Path(path_type=Path, file_okay=False), default=Path("evalita-build"),
              show_default=True, help="Build folder with manifest.json.")
@click.option("--org", default=DEFAULT_ORG, show_default=True,
              help="Hub organisation (or user): repositories are <org>/<task>.")
@click.option("--task", "tasks", type=TASK_CHOICE, multiple=True,
              help="Task to publish (repeatable); default: every built task.")
@click.option("--private", is_flag=True, help="Create missing repositories as private.")
@click.option("--revision", default="main", show_default=True,
              help="Branch to commit to (created from main if missing).")
@click.option("--message", default=None, help="Commit message (default: tool version, task and split sizes).")
@click.option("--dry-run", is_flag=True,
              help="Show per repository the files, sizes and what would change; commit nothing.")
@click.option("--jsonl", is_flag=True, help="Also publish the JSONL splits under jsonl/.")
@click.option("--to-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Write the repository layouts to DIR/<repository>/ instead of the Hub (offline).")
@click.option("--layout", type=click.Choice(["ours", "official"]), default="ours", show_default=True,
              help="ours: <org>/<task> with our split names; official: the repositories, configs and split names "
                   "of evalitahf/* that lm-eval's evalita_llm tasks read (missing official splits are listed).")
def push(build_dir: Path, org: str, tasks: tuple[str, ...], private: bool, revision: str, message: str | None,
         dry_run: bool, jsonl: bool, to_dir: Path | None, layout: str) -> None:
    """Publish each built task as the Hub dataset <org>/<task>, one commit per repository.

    The build is validated first; nothing invalid is published. Unchanged files are
    not uploaded and an unchanged build makes no commit. The token comes from HF_TOKEN
    or the stored Hub login and is never printed.
    """
    from ..hub.push import push as run_push
    from ..hub.push import write_to_dir

    try:
        if to_dir is not None:
            write_to_dir(build_dir, to_dir, org, list(tasks) or None, jsonl=jsonl, echo=click.echo, layout=layout,
                         dry_run=dry_run)
            return
        run_push(build_dir, org, list(tasks) or None, private=private, revision=revision, message=message,
                 dry_run=dry_run, jsonl=jsonl, layout=layout, echo=click.echo)
    except EvalitaDataError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(1)


@main.command()
@click.argument("task", type=TASK_CHOICE)
@click.option("--raw", "raw", type=click.Path(path_type=Path, file_okay=False), default=Path("raw"), show_default=True,
              help="Folder with one sub-folder of original files per task.")
@click.option("--revision", default=None, help="Dataset revision (branch, tag or commit) to download; default: main.")
@click.option("--force", is_flag=True, help="Replace a file that an earlier fetch wrote.")
def fetch(task: str, raw: Path, revision: str | None, force: bool) -> None:
    """Download TASK's originals into RAW/TASK/ where a public client can (sum: ARTeLab/fanpage);
    otherwise print where and how to get them, and exit 1."""
    from ..building.fetch import fetch as run_fetch

    try:
        run_fetch(task, raw, revision=revision, force=force, echo=click.echo)
    except EvalitaDataError as err:
        click.echo(f"error: {err}", err=True)
        sys.exit(1)


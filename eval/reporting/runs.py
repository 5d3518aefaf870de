"""Loading the runs of ``evalita-eval run`` for the report (the one reader, record/read.py), and the names models are shown under."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from ..naming import is_local, model_name
from ..record import RecordError, RunRecord, parse_record, read_run
from ..record.model import ModelRecord
from .tables import ScoresError

PERCENT = 100.0  # report tables are in percent, as the paper's

# One run, checked and typed (record/model.py): what every report, compare and publishing command reads.
RunResults = RunRecord

# (metric name, samples, task=entry name) -> score; the default resolves the name through the task's declaration.
ScoreSamples = Callable[..., float]


def load_results(path: Path, partial: bool = False) -> RunRecord:
    """One results.json (or the run folder holding it); an unfinished run only with ``partial`` (its finished tasks)."""
    try:
        return read_run(path, partial)
    except RecordError as err:
        raise ScoresError(str(err)) from None


def parse_results(path: Path, data: object, partial: bool = False) -> RunRecord:
    """A results.json already read, or built in memory (an lm-eval folder): ``path`` names it in errors and locates its samples."""
    try:
        return parse_record(path, data, partial)
    except RecordError as err:
        raise ScoresError(str(err)) from None


def _widened_name(model: ModelRecord) -> str:
    """A Hub id with its revision; a local folder by its name and weights fingerprint, never its path."""
    name = model.name_or_path
    if model.local_folder or is_local(name):
        return f"{model_name(name)}@{model.files_sha256[:8] if model.files_sha256 else 'local'}"
    return f"{name}@{model.revision or 'main'}"


def assign_display_names(runs: Sequence[RunRecord]) -> None:
    """Basename of model.name_or_path; the Hub id (a local folder's name), then @revision
    (@weights fingerprint for a local folder), then #i where equal."""
    names = [r.model.name_or_path.rstrip("/").split("/")[-1] for r in runs]
    for widen in (lambda i: model_name(runs[i].model.name_or_path), lambda i: _widened_name(runs[i].model)):
        names = [widen(i) if names.count(n) > 1 else n for i, n in enumerate(names)]
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        seen[n] = seen.get(n, 0) + 1
        runs[i].display = n if names.count(n) == 1 else f"{n} #{seen[n]}"

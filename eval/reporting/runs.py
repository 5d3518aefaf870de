"""Loading the runs of ``evalita-eval run`` for the report (the one reader, record/read.py), and the names models
are shown under."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..naming import display_name, given_name, is_local_model
from ..record import RecordError, RunRecord, parse_record, read_run
from ..record.model import ModelRecord
from .tables import ScoresError


def load_results(path: Path, partial: bool = False) -> RunRecord:
    """One results.json (or the run folder holding it); an unfinished run only with ``partial`` (its finished tasks)."""
    try:
        return read_run(path, partial)
    except RecordError as err:
        raise ScoresError(str(err)) from None


def parse_results(path: Path, data: object, partial: bool = False,
                  in_memory: dict[tuple[str, str], list[dict]] | None = None, samples: bool = True) -> RunRecord:
    """A results.json already read, or built in memory (an lm-eval folder, with its samples ``in_memory``): ``path``
    names it in errors and locates its samples (none read: ``samples`` False)."""
    try:
        return parse_record(path, data, partial, samples, in_memory=in_memory)
    except RecordError as err:
        raise ScoresError(str(err)) from None


def assign_display_names(runs: Sequence[RunRecord]) -> None:
    """The model's name (naming.display_name; a Hub id by its last part), widened where two runs share it:
    the whole Hub id, then @revision, then #i where still equal."""
    def name(model: ModelRecord, width: int) -> str:  # a given name or a local folder (its weights hash) as it is
        if given_name(model) is not None or is_local_model(model):
            return display_name(model)
        hub_id = model.name_or_path
        return (hub_id.rstrip("/").split("/")[-1], display_name(model), f"{hub_id}@{model.revision or 'main'}")[width]

    names = [name(r.model, 0) for r in runs]
    for width in (1, 2):
        names = [name(runs[i].model, width) if names.count(n) > 1 else n for i, n in enumerate(names)]
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        seen[n] = seen.get(n, 0) + 1
        runs[i].display = n if names.count(n) == 1 else f"{n} #{seen[n]}"

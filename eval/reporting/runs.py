"""Loading results.json files of ``evalita-eval run`` for the report, and the names models are shown under."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from ..naming import display_name, given_name, is_local_model
from .facts import check_run_extras, partial_counts, status_text
from .tables import ScoresError

PERCENT = 100.0  # report tables are in percent, as the paper's


# (metric name, samples, task=entry name) -> score; the default resolves the name through the task's declaration.
ScoreSamples = Callable[..., float]


@dataclass
class RunResults:
    """One results.json: one model, its tasks and prompts."""

    path: Path
    model: dict
    data: dict
    config: dict
    results: dict  # task -> prompt -> metric -> value (fraction), plus "n"
    timing: dict
    display: str = ""
    raw: dict = field(default_factory=dict)  # the whole results.json (baselines, parsed_by, tasks, status)
    origin: Path | None = None  # the folder it was read from when not a results.json (an lm-eval output folder)

    @property
    def status(self) -> str:
        return status_text(self.raw.get("status"), self.raw.get("tasks"), self.results)

    @property
    def partial(self) -> bool:
        return (self.raw.get("status") or "complete") != "complete"

    def samples_path(self, task: str, prompt: str) -> Path:
        return self.path.parent / "samples" / f"{task}_{prompt}.jsonl"


def load_results(path: Path, partial: bool = False) -> RunResults:
    """One results.json; an unfinished run only with ``partial`` (its finished tasks)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ScoresError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    return parse_results(path, data, partial)


def parse_results(path: Path, data: object, partial: bool = False) -> RunResults:
    """A results.json already read (``path`` names it in errors and locates its samples)."""
    if not isinstance(data, dict):
        raise ScoresError(f"{path}: expected a results.json object, got {type(data).__name__}")
    for key in ("model", "results"):
        if not isinstance(data.get(key), dict):
            raise ScoresError(f"{path}: missing object {key!r}; expected the results.json of `evalita-eval run`")
    if data.get("status") == "empty":
        skipped = data.get("skipped") if isinstance(data.get("skipped"), dict) else {}
        raise ScoresError(f"{path}: a run that evaluated nothing ({len(skipped)} task(s) skipped: "
                          f"{'; '.join(f'{k}: {v}' for k, v in list(skipped.items())[:3])}); nothing to report")
    if data.get("status", "complete") != "complete" and not partial:
        # Written after every task by `run`: an interrupted or killed run has only some tasks.
        raise ScoresError(f"{path}: an unfinished run (status {data.get('status')!r}, "
                          f"{partial_counts(data.get('tasks') if isinstance(data.get('tasks'), dict) else None, data['results'])}); "
                          "run the same `evalita-eval run` command again to complete it, or report its finished tasks with --partial")
    if not data["model"].get("name_or_path"):
        raise ScoresError(f"{path}: model.name_or_path is missing")
    for task, prompts in data["results"].items():
        if not isinstance(prompts, dict) or not all(isinstance(v, dict) for v in prompts.values()):
            raise ScoresError(f"{path}: results.{task} must map prompt -> {{metric: value}}")
    try:
        check_run_extras(path, data)
    except ValueError as err:
        raise ScoresError(str(err)) from None
    return RunResults(path, data["model"], data.get("data") or {}, data.get("config") or {}, data["results"],
                      data.get("timing") or {}, raw=data)


def _widened_name(model: dict) -> str:
    """The given name; a Hub id with its revision; a local folder by its name and weights fingerprint, never its path."""
    if given_name(model) is not None or is_local_model(model):
        return display_name(model)
    return f"{model['name_or_path']}@{model.get('revision') or 'main'}"


def _short_name(model: dict) -> str:
    """The given name, a local folder's ``<folder>-<weights hash>``, or a Hub id's last part."""
    if given_name(model) is not None or is_local_model(model):
        return display_name(model)
    return str(model["name_or_path"]).rstrip("/").split("/")[-1]


def assign_display_names(runs: Sequence[RunResults]) -> None:
    """The model's name (naming.display_name; a Hub id by its last part), widened where two runs share it:
    the whole Hub id, then @revision, then #i where still equal."""
    names = [_short_name(r.model) for r in runs]
    for widen in (lambda i: display_name(runs[i].model), lambda i: _widened_name(runs[i].model)):
        names = [widen(i) if names.count(n) > 1 else n for i, n in enumerate(names)]
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        seen[n] = seen.get(n, 0) + 1
        runs[i].display = n if names.count(n) == 1 else f"{n} #{seen[n]}"

"""The official Evalita-LLM splits on the Hub (``--data hf:ORG``, or ``hf:PATH`` for the same layout in a local
folder) as a data source of ``run``: docs/official-splits.md. Every record is checked against our schema."""

from __future__ import annotations

import json
from pathlib import Path

from evalita_data.hub.names import check_org
from evalita_data.network import NETWORK_ERRORS, unreachable
from evalita_data.taskspec import HubSplits

from .base import HubUnreachable, LoadedSplit, Source, canonical_sha256, first_problem
from .entries import TaskEntry

PREFIX = "hf:"


class OfficialDataError(ValueError):
    """The Hub copy does not match our schema, or lacks a declared split."""


def is_official(data: str | None) -> bool:
    return data is not None and data.startswith(PREFIX)


def check_reachable(what: str, err: BaseException) -> None:
    """``HubUnreachable`` where ``err`` (or what caused it) says the Hub could not be reached: offline mode, no
    network, a refused connection, a timeout; not a missing repository or split."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, NETWORK_ERRORS):
            raise HubUnreachable(f"{unreachable(what, err)}; check the network, HF_ENDPOINT and HF_HUB_OFFLINE, or "
                                 "evaluate a local folder with --data") from None
        current = current.__cause__ or current.__context__


class OfficialSource(Source):
    """A ``Source`` whose splits are the official ones, named as the runner names ours, each record checked against
    our schema (no manifest vouches for them); it also records the dataset revisions read (``provenance``)."""

    def __init__(self, org: str) -> None:
        super().__init__()
        if not org:
            raise ValueError(f"hf:ORG needs a Hub organisation name, got {org!r}")
        # A path (an organisation name never holds a '/'): the official layout in a local folder, resolved, so that a
        # dataset folder it lacks is never looked up as a Hub id ("./hub/faq" is "hub/faq" to datasets).
        self.local: Path | None = Path(org).expanduser().resolve() if "/" in org else None
        if self.local is not None and not self.local.is_dir():
            raise ValueError(f"hf:{org}: {self.local} is not a folder (expected the official layout, as 'evalita-data "
                             "push --layout official --to-dir' writes it)")
        if self.local is None:
            check_org(org, "hf:ORG organisation")
        self.org = org
        self._revisions: dict[str, str] = {}  # repo id -> commit sha read
        self._missing: dict[tuple[str, str], str] = {}  # (entry, split) -> why has_split said no

    @property
    def description(self) -> str:
        return f"{PREFIX}{self.org}"

    # -- the official names of an entry's split -----------------------------------------
    def _hub(self, entry: TaskEntry) -> HubSplits:
        hub = entry.spec.hub_splits
        if hub is None:
            raise OfficialDataError(f"{entry.name}: the task declares no official Hub copy (TaskSpec.hub_splits)")
        return hub

    def repo_id(self, entry: TaskEntry) -> str:
        if self.local is not None:
            return str(self.local / self._hub(entry).dataset)
        return f"{self.org}/{self._hub(entry).dataset}"

    def official_split(self, entry: TaskEntry, split: str) -> str:
        """Our split name (eval or few-shot split of the task) -> the official one."""
        spec, hub = entry.spec, self._hub(entry)
        mapping = {spec.eval_split: hub.test, spec.fewshot_split: hub.fewshot}
        return mapping.get(split, split)

    def config(self, entry: TaskEntry) -> str | None:
        return self._hub(entry).config or entry.config

    def revision(self, entry: TaskEntry) -> str | None:
        """The commit sha of the dataset, read once so that every split comes from one commit."""
        repo_id = self.repo_id(entry)
        if self.local is not None:
            return None  # a local folder: nothing to pin
        if repo_id not in self._revisions:
            from huggingface_hub import HfApi

            try:
                self._revisions[repo_id] = HfApi().dataset_info(repo_id).sha
            except Exception as err:
                check_reachable(f"the dataset {repo_id} ({PREFIX}{self.org})", err)
                raise
        return self._revisions[repo_id]

    def provenance(self) -> dict:
        return {"revisions": dict(self._revisions)}  # repo id -> commit sha of every dataset read so far

    # -- reading (Source) -----------------------------------------------------------------
    def has_split(self, entry: TaskEntry, split: str) -> bool:
        if entry.spec.hub_splits is None:  # a registered task without an official copy: skipped like a missing split
            self._missing[(entry.name, split)] = "the task declares no official Hub copy (TaskSpec.hub_splits)"
            return False
        try:
            self.load(entry, split)
        except (OfficialDataError, HubUnreachable):
            raise  # a copy that breaks our schema, or no Hub at all, is an error, not a missing split
        except Exception as err:  # noqa: BLE001 - the reason is kept for why_missing
            self._missing[(entry.name, split)] = str(err)
            return False
        return True

    def why_missing(self, entry: TaskEntry, split: str) -> str:
        return self._missing.get((entry.name, split), super().why_missing(entry, split))

    def _read(self, entry: TaskEntry, split: str) -> LoadedSplit:
        repo_id, official = self.repo_id(entry), self.official_split(entry, split)
        where = f"{repo_id}" + (f" config {self.config(entry)}" if self.config(entry) else "")
        # Where the official few-shot split is not ours (REL, SUM), a copy that `push --layout official`
        # wrote has ours under its own name instead: read it when the official one is absent.
        fallback = split if split == entry.spec.fewshot_split and self._hub(entry).fewshot_not_ours else None
        records = [dict(r) for r in self._dataset(entry, repo_id, where, official, fallback)]
        if (bad := first_problem(entry, records)) is not None:
            raise OfficialDataError(f"{where} split {official} row {bad[0]}: does not match the "
                                    f"{entry.task_id} schema: {bad[1]}")
        # One canonical JSON line a record (sorted keys): the Hub's rows, not a build's bytes.
        sha = canonical_sha256(records, lambda rec: json.dumps(rec, ensure_ascii=False, sort_keys=True))
        return LoadedSplit(records, sha, where)

    def _verify(self, entry: TaskEntry, split: str, loaded: LoadedSplit) -> None:
        """Nothing more: each record was checked as read (``_read``)."""

    def _dataset(self, entry: TaskEntry, repo_id: str, where: str, official: str, fallback: str | None):
        import datasets  # here only: 88 MiB of imports (pandas, pyarrow) that a local folder's run never needs

        datasets.disable_progress_bars()  # one bar per task and prompt is ours; theirs is noise here
        names = [official] + ([fallback] if fallback not in (None, official) else [])
        for i, name in enumerate(names):
            try:
                return datasets.load_dataset(repo_id, name=self.config(entry), split=name,
                                             revision=self.revision(entry))
            except HubUnreachable:
                raise
            except Exception as err:  # unknown repository, config or split, or the Hub unreachable
                check_reachable(f"the dataset {where}, split {name} ({entry.name})", err)
                if i + 1 < len(names):
                    continue  # the official split is absent: try ours
                first = str(err).splitlines()[0] if str(err) else type(err).__name__
                raise FileNotFoundError(f"{entry.name}: cannot read {where} split {official} ({first[:300]})") from None
        raise AssertionError("unreachable")

"""A Hub organisation as a source (``--hub-org ORG``): the repositories ``ORG/<task>`` that
``evalita-data push`` published (Parquet splits and a ``manifest.json``), read through
huggingface_hub's content-addressed cache."""

from __future__ import annotations

from pathlib import Path

from evalita_data.manifest import MANIFEST_FILE, BuiltTask, read_published
from evalita_data.network import hub_endpoint
from evalita_data.safepaths import UnsafePath, check_hub_name

from .base import HubUnreachable, LoadedSplit, Source, read_parquet_file, vouching
from .entries import TaskEntry


class HubSource(Source):
    def __init__(self, org: str) -> None:
        super().__init__()
        try:
            check_hub_name(org, "--hub-org")
        except UnsafePath as err:
            raise ValueError(str(err)) from None
        self.hub_org = org
        self._manifests: dict[str, BuiltTask | None] = {}

    @property
    def description(self) -> str:
        return f"hf://{self.hub_org}"

    def _read(self, entry: TaskEntry, split: str) -> LoadedSplit:
        repo, name = f"{self.hub_org}/{entry.task_id}", f"data/{entry.split_key(split)}.parquet"
        return read_parquet_file(hub_file(repo, name), f"hf://datasets/{repo}/{name}")

    def _manifest_entry(self, entry: TaskEntry) -> tuple[BuiltTask | None, str]:
        repo = f"{self.hub_org}/{entry.task_id}"
        where = f"hf://datasets/{repo}/{MANIFEST_FILE}"
        if repo not in self._manifests:
            try:
                self._manifests[repo] = vouching(read_published, Path(hub_file(repo, MANIFEST_FILE)), where)
            except HubUnreachable:
                raise
            except FileNotFoundError:
                self._manifests[repo] = None  # a repository without manifest: nothing to compare with
        return self._manifests[repo], where


def hub_file(repo: str, name: str) -> str:
    """A file of a Hub dataset repository, through huggingface_hub's content-addressed cache."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError, RepositoryNotFoundError

    try:
        return hf_hub_download(repo, name, repo_type="dataset")
    except LocalEntryNotFoundError:  # offline (HF_HUB_OFFLINE) or unreachable, and not in the local cache
        raise HubUnreachable(f"hf://datasets/{repo}/{name}: the Hub at {hub_endpoint()} cannot be reached (offline, "
                             "HF_HUB_OFFLINE or no network) and the file is not in the local cache; evaluate a local "
                             "folder with --data") from None
    except (EntryNotFoundError, RepositoryNotFoundError) as err:
        raise FileNotFoundError(f"hf://datasets/{repo}/{name}: not found on the Hub ({type(err).__name__})") from None
    except Exception as err:  # noqa: BLE001 - offline, refused, timed out: one line
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise HubUnreachable(f"hf://datasets/{repo}/{name}: cannot read it from the Hub at {hub_endpoint()} "
                             f"({first[:200]}); check the network or HF_ENDPOINT, or evaluate a local folder with "
                             "--data") from None

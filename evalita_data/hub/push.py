"""``evalita-data push``: publish each built task as a dataset repository on the Hub.

One repository per task (``<org>/<task>``), one commit per repository, only additions:
nothing is ever deleted. Files whose remote copy already has the same content
(LFS sha256 or git blob id) are not uploaded; when no file differs, no commit is made.
The token is taken from ``HF_TOKEN`` or the stored Hub login by huggingface_hub
and is never printed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from huggingface_hub import CommitOperationAdd, HfApi, get_token
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

from .. import __version__
from ..card import DEFAULT_ORG
from ..errors import EvalitaDataError
from ..network import NETWORK_ERRORS, short_error
from ..manifest import BuiltTask
from .layout import RepoFile, TaskRepo, load_checked_manifest, task_repo
from .official import LAYOUTS, official_repo
from ..safepaths import check_hub_name, check_inside, check_output_apart

REPO_TYPE = "dataset"
DEFAULT_BRANCH = "main"
# Waits before each retry of a failed network call (exponential backoff).
RETRY_DELAYS: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
_RETRY_STATUS = {408, 429, 500, 502, 503, 504}


class PushError(EvalitaDataError):
    """A push that could not be completed; the remote repository was left as it was."""


class HubUnreachable(PushError):
    """Every attempt of a call failed on the network or with a retryable answer (5xx, 429)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class FileChange:
    path: str
    size: int
    status: str  # "new" | "changed" | "unchanged" | "local" (the remote could not be read to compare)


@dataclass
class RepoPlan:
    repo: TaskRepo
    exists: bool
    parent_commit: str | None
    changes: list[FileChange]
    # Remote files that this build does not produce: left alone, listed for the reader.
    others: list[str] = field(default_factory=list)
    # Why the remote could not be read (a dry run without the Hub): the files are not compared.
    unreached: str | None = None

    def to_upload(self) -> list[RepoFile]:
        changed = {c.path for c in self.changes if c.status != "unchanged"}
        return [f for f in self.repo.files if f.path in changed]


def _retryable(err: BaseException) -> bool:
    if isinstance(err, HfHubHTTPError):
        response = getattr(err, "response", None)
        return response is not None and response.status_code in _RETRY_STATUS
    return isinstance(err, NETWORK_ERRORS)


def with_retries(what: str, call: Callable[[], object], delays: Sequence[float] = RETRY_DELAYS,
                 sleep: Callable[[float], None] | None = None, echo: Callable[[str], None] = lambda _m: None):
    """Run ``call``; retry network errors and 5xx/429 answers after each delay, then fail clearly."""
    for attempt in range(len(delays) + 1):
        try:
            return call()
        except Exception as err:  # noqa: BLE001 - filtered right below
            if isinstance(err, (RepositoryNotFoundError, RevisionNotFoundError)):
                raise  # answers, not failures: the caller handles them
            if not _retryable(err):
                if isinstance(err, HfHubHTTPError):
                    # After a lost answer, an earlier attempt may have gone through (then: 412 conflict).
                    state = "the remote was left as it was" if attempt == 0 else \
                        "an earlier attempt may have committed: run the push again to see what is left"
                    raise PushError(f"{what}: {short_error(err)}; {state}") from None
                raise
            if attempt == len(delays):
                tries = "1 attempt" if attempt == 0 else f"{attempt + 1} attempts"
                raise HubUnreachable(f"{what}: failed after {tries} ({short_error(err)}); the remote was left as it "
                                     "was",
                                     f"{what}: {short_error(err)}") from None
            echo(f"  {what}: {short_error(err)}; retrying in {delays[attempt]:g}s")
            (sleep or time.sleep)(delays[attempt])
    raise AssertionError("unreachable")


def remote_state(api: HfApi, repo_id: str, revision: str,
                 delays: Sequence[float]) -> tuple[bool, str | None, dict[str, tuple[str, str]]]:
    """(repo exists, head commit of ``revision`` or main, {path: ("sha256"|"git", digest)})."""
    def info(rev: str):
        return api.repo_info(repo_id, repo_type=REPO_TYPE, revision=rev)

    where = f"{api.endpoint}/datasets/{repo_id}"  # names the host and the dataset when it cannot be reached
    try:
        head = with_retries(f"{where}: read", lambda: info(revision), delays)
    except RepositoryNotFoundError:
        return False, None, {}
    except RevisionNotFoundError:
        # A new branch starts from main: compare with what main holds.
        head = with_retries(f"{where}: read", lambda: info(DEFAULT_BRANCH), delays)
    tree = with_retries(
        f"{where}: list files",
        lambda: list(api.list_repo_tree(repo_id, recursive=True, repo_type=REPO_TYPE, revision=head.sha)),
        delays,
    )
    files = {}
    for entry in tree:
        if getattr(entry, "blob_id", None) is None:
            continue  # a folder
        lfs = getattr(entry, "lfs", None)
        files[entry.path] = ("sha256", lfs.sha256) if lfs is not None else ("git", entry.blob_id)
    return True, head.sha, files


def plan_repo(api: HfApi, repo: TaskRepo, revision: str, delays: Sequence[float]) -> RepoPlan:
    return compare(repo, *remote_state(api, repo.repo_id, revision, delays))


def compare(repo: TaskRepo, exists: bool, parent: str | None, remote: dict[str, tuple[str, str]]) -> RepoPlan:
    """The plan of ``repo`` against the files a repository holds ({path: ("sha256"|"git", digest)})."""
    changes = []
    for f in repo.files:
        have = remote.get(f.path)
        if have is None:
            status = "new"
        else:
            kind, digest = have
            same = digest == (f.sha256 if kind == "sha256" else f.git_oid)
            status = "unchanged" if same else "changed"
        changes.append(FileChange(f.path, len(f.data), status))
    ours = {f.path for f in repo.files}
    others = sorted(p for p in remote if p not in ours and p != ".gitattributes")
    return RepoPlan(repo, exists, parent, changes, others)


def layout_repo(build: Path, task: str, entry: BuiltTask, org: str, jsonl: bool, layout: str,
                echo: Callable[[str], None]) -> TaskRepo:
    """The task's repository in ``layout`` ("ours" or "official"); the official splits it lacks are echoed, one line
    each."""
    if layout not in LAYOUTS:
        raise PushError(f"layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    if layout == "ours":
        return task_repo(build, task, entry, org, jsonl=jsonl)
    repo, missing = official_repo(build, task, entry, org, jsonl=jsonl)
    for m in missing:
        echo(f"missing: {m.line()}")
    return repo


def commit_message(repo: TaskRepo, entry: BuiltTask) -> str:
    splits = ", ".join(f"{k} {v.rows}" for k, v in entry.splits.items())
    return f"evalita-data {__version__}: {repo.task} ({splits})"


def push(
    build: Path,
    org: str = DEFAULT_ORG,
    tasks: list[str] | None = None,
    private: bool = False,
    revision: str = DEFAULT_BRANCH,
    message: str | None = None,
    dry_run: bool = False,
    jsonl: bool = False,
    layout: str = "ours",
    api: HfApi | None = None,
    delays: Sequence[float] = RETRY_DELAYS,
    echo: Callable[[str], None] = print,
) -> list[RepoPlan]:
    """Publish the build's tasks; returns the plan of every repository (what changed).

    Raises BuildRefused before any network call if the build is invalid, and
    PushError when the Hub cannot be reached or refuses a commit.
    """
    check_hub_name(org)
    manifest, chosen = load_checked_manifest(build, tasks)
    api = api or HfApi()
    if not dry_run and (api.token or get_token()) is None:
        raise PushError("no Hub token: set HF_TOKEN or run 'hf auth login' (the token is never printed)")
    plans = []
    unreached: str | None = None  # a dry run asks the Hub once: after a failure, not again
    # Every repository is computed before the first request: a task the layout refuses sends nothing.
    repos = {task: layout_repo(build, task, manifest.tasks[task], org, jsonl, layout, echo) for task in chosen}
    for task, repo in repos.items():
        entry = manifest.tasks[task]
        if dry_run:
            plan = dry_plan(api, repo, revision, unreached)
            unreached = plan.unreached and f"the Hub at {api.endpoint} was not reachable (see above)"
        else:
            plan = plan_repo(api, repo, revision, delays)
        plans.append(plan)
        describe_plan(plan, revision, dry_run, echo)
        if not dry_run:
            commit_plan(api, plan, revision, private, message or commit_message(repo, entry), delays, echo)
    if unreached:
        echo(f"dry run without the Hub: the local files of {len(plans)} task(s) listed, none compared with "
             f"{api.endpoint}; nothing sent")
    return plans


def dry_plan(api: HfApi, repo: TaskRepo, revision: str, unreached: str | None) -> RepoPlan:
    """The plan of a dry run: compared with the remote after one attempt, or the local files alone."""
    if unreached is None:
        try:
            return plan_repo(api, repo, revision, delays=())
        except HubUnreachable as err:
            unreached = err.reason
    changes = [FileChange(f.path, len(f.data), "local") for f in repo.files]
    return RepoPlan(repo, exists=False, parent_commit=None, changes=changes, unreached=unreached)


def commit_plan(api: HfApi, plan: RepoPlan, revision: str, private: bool, message: str,
                delays: Sequence[float] = RETRY_DELAYS, echo: Callable[[str], None] = print) -> str | None:
    """One commit of the plan's new and changed files (only additions); the commit id, or None if nothing changed."""
    repo, upload = plan.repo, plan.to_upload()
    if not upload:
        return None
    if not plan.exists:
        with_retries(f"{repo.repo_id}: create", lambda: api.create_repo(
            repo.repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True), delays, echo=echo)
    if revision != DEFAULT_BRANCH:
        with_retries(f"{repo.repo_id}: branch {revision}", lambda: api.create_branch(
            repo.repo_id, branch=revision, repo_type=REPO_TYPE, exist_ok=True), delays, echo=echo)
    info = with_retries(f"{repo.repo_id}: commit", lambda: api.create_commit(
        repo.repo_id,
        [CommitOperationAdd(path_in_repo=f.path, path_or_fileobj=f.data) for f in upload],
        commit_message=message,
        repo_type=REPO_TYPE,
        revision=revision,
        # The commit fails instead of overwriting a change made since we looked.
        parent_commit=plan.parent_commit,
    ), delays, echo=echo)
    echo(f"  committed {len(upload)} file(s): {info.oid}")
    return info.oid


def describe_plan(plan: RepoPlan, revision: str, dry_run: bool, echo: Callable[[str], None]) -> None:
    repo = plan.repo
    upload = plan.to_upload()
    where = f"{repo.repo_id}@{revision}"
    state = "" if plan.exists else " (new repository)"
    if plan.unreached:
        echo(f"{where}: could not compare with the remote ({plan.unreached}); would send these {len(upload)} file(s) "
             "where they differ from it")
    elif not upload:
        echo(f"{where}: unchanged, no commit")
    else:
        verb = "would commit" if dry_run else "committing"
        echo(f"{where}{state}: {verb} {len(upload)} of {len(plan.changes)} file(s)")
    list_changes(plan, echo)


def list_changes(plan: RepoPlan, echo: Callable[[str], None]) -> None:
    """A line per file of the plan: new, changed, unchanged (or local), and those kept (not from this build)."""
    for c in plan.changes:
        echo(f"  {c.status:<9} {c.size:>10}  {c.path}")
    for p in plan.others:
        echo(f"  kept      {'':>10}  {p} (not from this build; left alone)")


def local_plan(repo: TaskRepo, folder: Path) -> RepoPlan:
    """The plan of writing ``repo`` into ``folder`` (``push --to-dir``), compared as the Hub push compares:
    the folder's files (followed into no linked folder) by their git blob id."""
    ours = {f.path for f in repo.files}
    present = {}
    for top, dirs, names in os.walk(folder):  # nothing when the folder is not there yet
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            file = Path(top) / name
            path = file.relative_to(folder).as_posix()  # (not a regular file, a FIFO: never read, "changed")
            readable = path in ours and file.is_file()
            present[path] = ("git", RepoFile(path, file.read_bytes()).git_oid if readable else "")
    return compare(repo, folder.is_dir(), None, present)


def write_to_dir(build: Path, dest: Path, org: str = DEFAULT_ORG, tasks: list[str] | None = None, jsonl: bool = False,
                 echo: Callable[[str], None] = print, layout: str = "ours", dry_run: bool = False) -> list[TaskRepo]:
    """``push --to-dir``: the exact repository layout of every task under ``dest/<name>/``, the
    repository's name (ours: the task id; official: ``word_in_context``, ``faq``...). Each folder's
    files are listed as the Hub push lists them (new, changed, unchanged, kept); a file of the folder
    that differs from this build (a hand edit, or an older build's) refuses the push before anything is
    written: a local folder keeps no history to recover it from."""
    from .layout import write_repo_dir

    check_hub_name(org)
    check_output_apart(dest, {"--build": build}, out_flag="--to-dir")
    manifest, chosen = load_checked_manifest(build, tasks)
    repos = [layout_repo(build, task, manifest.tasks[task], org, jsonl, layout, echo) for task in chosen]
    plans = []
    for repo in repos:  # a repository folder that is a link out of DEST refuses the push before anything is written
        folder = check_inside(dest / repo.repo_id.split("/")[1], dest)
        plans.append(local_plan(repo, folder))
        upload = plans[-1].to_upload()
        echo(f"{folder}: {'would write' if dry_run else 'writing'} {len(upload)} of {len(repo.files)} file(s), "
             f"{sum(len(f.data) for f in upload)} bytes")
        list_changes(plans[-1], echo)
    edited = [dest / plan.repo.repo_id.split("/")[1] / c.path for plan in plans for c in plan.changes
              if c.status == "changed"]
    if edited:
        which = f" and {len(edited) - 1} other file(s) listed as changed differ" if len(edited) > 1 else " differs"
        raise PushError(f"{edited[0]}{which} from this build (a hand edit, or an older build's): nothing was written; "
                        "move away what you want to keep (or remove it), then push again")
    for repo in [] if dry_run else repos:
        write_repo_dir(repo, dest / repo.repo_id.split("/")[1], root=dest)
    return repos

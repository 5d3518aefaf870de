"""``evalita-data fetch TASK``: download the originals that a public client can get.

Only Fanpage (``sum``) is distributed through a client we already depend on
(``huggingface_hub``): its splits are written to ``raw/sum/fanpage.csv`` in the format
the converter reads (``source``, ``target``; see raw/sum/README.md), and the dataset's
revision (commit sha), license and file hashes to ``raw/sum/FETCHED.json``, which the
build copies into the task's manifest entry. Every other task says where and how to
obtain its files (the TaskSpec's ``obtain_hint``); nothing is scraped, no password asked.
A user's existing raw files are never overwritten without ``--force``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Callable, Iterator

from ..errors import EvalitaDataError
from ..network import NETWORK_ERRORS, hub_endpoint, short_error, unreachable
from .rawsource import sha256_file
from ..registry import get_task

# What fetch writes beside the data: read back by the build (pipeline.convert_task).
FETCHED = "FETCHED.json"
FANPAGE_REPO = "ARTeLab/fanpage"
FANPAGE_CSV = "fanpage.csv"
TMP_CSV = f".{FANPAGE_CSV}.tmp"  # renamed to FANPAGE_CSV once complete
# The README's export order: train, validation, test, as one pool.
SPLIT_ORDER = ("train", "validation", "test")


class FetchError(EvalitaDataError):
    """A task that cannot be fetched, or a fetch that would overwrite a user's files."""


def not_fetchable(task: str) -> str:
    """Where and how to get a task's originals by hand."""
    spec = get_task(task)
    return (f"{task}: {spec.title} cannot be downloaded by evalita-data (no public client gives it). Where and how: "
            f"{spec.obtain_hint} Source: {spec.source}. Homepage: {spec.homepage}. Then run `evalita-data build --task "
            f"{task}`.")


def fetched_provenance(task_dir: Path) -> dict | None:
    """The FETCHED.json that fetch wrote into a raw task folder, if any."""
    path = task_dir / FETCHED
    return json.loads(path.read_text("utf-8")) if path.is_file() else None


def _split_rank(path: str) -> tuple[int, str]:
    name = path.rsplit("/", 1)[-1].lower()
    for i, split in enumerate(SPLIT_ORDER):
        if split in name:
            return i, path
    return len(SPLIT_ORDER), path


def _rows(local: Path) -> Iterator[tuple[str, str]]:
    """(source, target) of every row of one downloaded Parquet or CSV file, streamed."""
    if local.suffix == ".parquet":
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(local).iter_batches(columns=["source", "target"], batch_size=1024):
            yield from zip(batch.column("source").to_pylist(), batch.column("target").to_pylist())
        return
    csv.field_size_limit(1 << 26)
    with open(local, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            yield row["source"], row["target"]


def _check_destination(folder: Path, force: bool) -> Path:
    dest = folder / FANPAGE_CSV
    others = sorted(p.name for p in folder.glob("*.csv") if p.name != FANPAGE_CSV)
    if others:
        # The converter pools every raw/sum/*.csv: a second copy would duplicate articles.
        raise FetchError(f"{folder}: already holds {', '.join(others)}, which the build would pool with {FANPAGE_CSV}; "
                         "move them away first (nothing was written)")
    if dest.exists() and not force:
        raise FetchError(f"{dest} exists; refusing to overwrite it (use --force to replace it)")
    return dest


def fetch_fanpage(raw_root: Path, revision: str | None = None, force: bool = False,
                  echo: Callable[[str], None] = print) -> Path:
    """ARTeLab/fanpage (all splits) -> raw/sum/fanpage.csv + FETCHED.json; returns the CSV path."""
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    folder = raw_root / get_task("sum").raw_dir
    dest = _check_destination(folder, force)
    try:
        return _download_fanpage(folder, dest, revision, echo)
    except NETWORK_ERRORS as err:  # offline, no DNS, refused, timed out, HF_HUB_OFFLINE
        raise FetchError(f"{unreachable(f'the dataset {FANPAGE_REPO}', err)}; check the network or HF_ENDPOINT "
                         f"(nothing was written to {folder})") from None
    except (RepositoryNotFoundError, RevisionNotFoundError) as err:
        raise FetchError(f"{hub_endpoint()}: dataset {FANPAGE_REPO}{'@' + revision if revision else ''} not found "
                         f"({type(err).__name__}); nothing was written to {folder}") from None
    except HfHubHTTPError as err:
        raise FetchError(f"{hub_endpoint()}: dataset {FANPAGE_REPO}: {short_error(err)}; nothing was written to "
                         f"{folder}") from None
    finally:
        (folder / TMP_CSV).unlink(missing_ok=True)  # a download cut short leaves no half file


def _download_fanpage(folder: Path, dest: Path, revision: str | None, echo: Callable[[str], None]) -> Path:
    from huggingface_hub import HfApi, hf_hub_download

    api = HfApi()
    info = api.dataset_info(FANPAGE_REPO, revision=revision)
    sha = info.sha  # every file from this one commit
    card = info.card_data.to_dict() if info.card_data is not None else {}
    listed = api.list_repo_files(FANPAGE_REPO, repo_type="dataset", revision=sha)
    # One copy of the data: the Parquet files if there are any, else the CSV files.
    files = sorted((f for f in listed if f.endswith(".parquet")), key=_split_rank) or \
        sorted((f for f in listed if f.endswith(".csv")), key=_split_rank)
    if not files:
        raise FetchError(f"{FANPAGE_REPO}@{sha}: no Parquet or CSV data file; the dataset layout changed")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / TMP_CSV
    hashes, rows = {}, 0
    with open(tmp, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["source", "target"])
        for name in files:
            local = Path(hf_hub_download(FANPAGE_REPO, name, repo_type="dataset", revision=sha))
            hashes[name] = sha256_file(local)
            n = 0
            for source, target in _rows(local):
                writer.writerow([source, target])
                n += 1
            echo(f"  {name}: {n} rows")
            rows += n
    tmp.replace(dest)
    provenance = {
        "repo": f"datasets/{FANPAGE_REPO}", "revision": sha, "license": card.get("license", "unknown"),
        "files": hashes, "rows": rows, "written": {FANPAGE_CSV: sha256_file(dest)},
    }
    (folder / FETCHED).write_text(json.dumps(provenance, ensure_ascii=False, indent=2, sort_keys=True) + "\n", "utf-8")
    echo(f"{dest}: {rows} rows from {FANPAGE_REPO}@{sha} (license: {provenance['license']})")
    return dest


def fetch(task: str, raw_root: Path, revision: str | None = None, force: bool = False,
          echo: Callable[[str], None] = print) -> Path:
    """Download a task's originals with the fetcher its spec declares (``TaskSpec.fetcher``)."""
    spec = get_task(task)
    fetcher = spec.load_fetcher()
    if fetcher is None:
        raise FetchError(not_fetchable(task))
    return fetcher(raw_root, revision=revision, force=force, echo=echo)

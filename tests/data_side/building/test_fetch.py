"""`evalita-data fetch`: Fanpage from the (stub) Hub into raw/sum/, then `build --task sum`."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("huggingface_hub")

from evalita_data.building.pipeline import build  # noqa: E402
from hub_stub import GITATTRIBUTES, Repo, StoredFile  # noqa: E402
from publish_fixtures import RAW_SAMPLES, hub, hub_env, run_cli  # noqa: E402,F401 - fixtures

SAMPLE_CSV = RAW_SAMPLES / "sum" / "fanpage.csv"


def sample_rows() -> list[tuple[str, str]]:
    with open(SAMPLE_CSV, encoding="utf-8", newline="") as fh:
        return [(r["source"], r["target"]) for r in csv.DictReader(fh)]


def parquet(rows: list[tuple[str, str]]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"source": [r[0] for r in rows], "target": [r[1] for r in rows]}), buf)
    return buf.getvalue()


def serve_fanpage(hub) -> str:
    """ARTeLab/fanpage with the committed sample's 40 rows cut into train/validation/test Parquet files."""
    rows = sample_rows()
    files = {
        ".gitattributes": StoredFile(GITATTRIBUTES, False),
        "README.md": StoredFile(b"---\nlicense: unknown\n---\n# fanpage\n", False),
        # named so that name order (test, train, validation) differs from the export order
        "ARTeLab--fanpage/csv-test.parquet": StoredFile(parquet(rows[30:]), True),
        "ARTeLab--fanpage/csv-train.parquet": StoredFile(parquet(rows[:20]), True),
        "ARTeLab--fanpage/csv-validation.parquet": StoredFile(parquet(rows[20:30]), True),
    }
    repo = Repo("ARTeLab/fanpage", private=False)
    sha = repo.commit("main", "fanpage", files).sha
    with hub.state.lock:
        hub.state.repos[repo.repo_id] = repo
    return sha


def test_fetch_sum_then_build_equals_the_committed_sample(hub, tmp_path: Path) -> None:  # noqa: F811
    sha = serve_fanpage(hub)
    env = hub_env(hub, tmp_path / "hf", token=None)
    raw = tmp_path / "raw"
    proc = run_cli(["fetch", "sum", "--raw", str(raw)], env)
    assert proc.returncode == 0, proc.stderr
    fetched = raw / "sum" / "fanpage.csv"
    with open(fetched, encoding="utf-8", newline="") as fh:
        assert [(r["source"], r["target"]) for r in csv.DictReader(fh)] == sample_rows()
    provenance = json.loads((raw / "sum" / "FETCHED.json").read_text("utf-8"))
    assert provenance["revision"] == sha and provenance["license"] == "unknown" and provenance["rows"] == 40
    assert sorted(provenance["files"]) == ["ARTeLab--fanpage/csv-test.parquet", "ARTeLab--fanpage/csv-train.parquet",
                                           "ARTeLab--fanpage/csv-validation.parquet"]

    out = tmp_path / "build"
    proc = run_cli(["build", "--raw", str(raw), "--out", str(out), "--task", "sum"], env)
    assert proc.returncode == 0, proc.stderr
    entry = json.loads((out / "manifest.json").read_text("utf-8"))["tasks"]["sum"]
    assert entry["fetched"]["revision"] == sha and entry["fetched"]["license"] == "unknown"
    reference = build(RAW_SAMPLES, tmp_path / "ref", tasks=["sum"], progress=False)
    assert reference.built()
    ref_entry = json.loads((tmp_path / "ref" / "manifest.json").read_text("utf-8"))["tasks"]["sum"]
    # the same rows in the same order as the committed sample: the same splits, byte for byte
    assert {k: v["sha256"] for k, v in entry["splits"].items()} == {k: v["sha256"] for k, v in ref_entry["splits"].items()}

    # a second fetch never overwrites silently; --force does
    before = fetched.read_bytes()
    proc = run_cli(["fetch", "sum", "--raw", str(raw)], env)
    assert proc.returncode == 1 and "refusing to overwrite" in proc.stderr and "--force" in proc.stderr
    assert fetched.read_bytes() == before
    assert run_cli(["fetch", "sum", "--raw", str(raw), "--force"], env).returncode == 0
    # a user's own CSV would be pooled with ours by the converter: refused even with --force
    (raw / "sum" / "mine.csv").write_text("source,target\na,b\n", "utf-8")
    proc = run_cli(["fetch", "sum", "--raw", str(raw), "--force"], env)
    assert proc.returncode == 1 and "mine.csv" in proc.stderr


@pytest.mark.parametrize("task", ["te", "at", "ls"])
def test_fetch_of_a_source_without_a_client_says_where_to_get_it(task: str, tmp_path: Path) -> None:
    from evalita_data.registry import get_task

    proc = run_cli(["fetch", task, "--raw", str(tmp_path / "raw")], {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    assert proc.returncode == 1
    assert get_task(task).obtain_hint in proc.stderr and get_task(task).homepage in proc.stderr
    assert not (tmp_path / "raw").exists()

"""SUM: seeded, streaming sample of a source/target CSV (fixture in the documented format)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from evalita_data.errors import MissingSource, SourceError
from evalita_data.building.pipeline import build

from paths import SAMPLES
from constructed import by_split, read_split, run_converter

SUM_DIR = SAMPLES / "sum"


def fixture_rows() -> list[dict]:
    with open(SUM_DIR / "fanpage.csv", encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_counts_records_and_report(tmp_path: Path) -> None:
    out = tmp_path / "build"
    build(SAMPLES, out, ["sum"], progress=False)
    test, train = read_split(out, "sum", "test"), read_split(out, "sum", "train")
    assert (len(test), len(train)) == (34, 3)  # 40 rows - 3 skipped = 37; train 37 // 10, test the rest
    sources = [r["source"] for r in test + train]
    assert len(set(sources)) == 37
    rows = {r["source"]: r["target"] for r in fixture_rows()}
    assert all(rows[r["source"]] == r["target"] for r in test + train)
    assert any("\nNuovo paragrafo:" in s for s in sources)  # a quoted field that spans lines
    report = json.loads((out / "manifest.json").read_text())["tasks"]["sum"]["report"]
    assert report["dropped"] == {
        "duplicate article (same source text as an earlier row; the first is kept)": 1,
        "empty article (source)": 1,
        "empty summary (target)": 1,
    }
    assert report["examples"]["dropped: duplicate article (same source text as an earlier row; the first is kept)"] == ["fanpage.csv:15 = fanpage.csv:8"]
    assert report["notes"]["usable rows"] == 37


def test_deterministic_and_independent_of_seed(tmp_path: Path) -> None:
    builds = []
    for name, seed in (("a", None), ("b", None), ("c", 5)):
        build(SAMPLES, tmp_path / name, ["sum"], seed=seed, progress=False)
        builds.append({s: (tmp_path / name / "sum" / f"{s}.jsonl").read_bytes() for s in ("test", "train")})
    assert builds[0] == builds[1] == builds[2]


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\r\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path.parent


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(min_value=2, max_value=400), extra=st.booleans())
def test_sample_sizes_and_no_overlap(tmp_path: Path, n: int, extra: bool) -> None:
    header = ["id", "source", "target"] if extra else ["source", "target"]
    rows = [([str(i)] if extra else []) + [f"Articolo numero {i}.", f"Sintesi {i}."] for i in range(n)]
    task_dir = _write_csv(tmp_path / f"sum{n}{extra}" / "data.csv", header, rows)
    splits = by_split(run_converter("sum", task_dir, 0)[0])
    n_train = n // 10
    assert len(splits.get("train", [])) == n_train
    assert len(splits["test"]) == min(100, n - n_train)
    test_ids = [int(r["source"].split()[-1].rstrip(".")) for r in splits["test"]]
    train_ids = [int(r["source"].split()[-1].rstrip(".")) for r in splits.get("train", [])]
    assert not set(test_ids) & set(train_ids)
    assert test_ids == sorted(test_ids) and train_ids == sorted(train_ids)  # source order
    assert all(r["target"] == f"Sintesi {i}." for r, i in zip(splits["test"], test_ids))


def test_several_files_are_one_pool(tmp_path: Path) -> None:
    _write_csv(tmp_path / "sum" / "a_train.csv", ["source", "target"], [[f"A{i}", f"a{i}"] for i in range(150)])
    _write_csv(tmp_path / "sum" / "b_test.csv", ["source", "target"], [[f"B{i}", f"b{i}"] for i in range(50)])
    pairs, report = run_converter("sum", tmp_path / "sum", 0)
    splits = by_split(pairs)
    assert (len(splits["test"]), len(splits["train"])) == (100, 20)
    assert report.notes["usable rows in no split (not sampled)"] == 80
    assert any(r["source"].startswith("B") for r in splits["test"] + splits["train"])


@pytest.mark.parametrize("content, message", [
    ('source,target\n"Articolo chiuso","Sintesi"\n"Articolo mai chiuso,Sintesi\n', r"data.csv:3: malformed CSV record \(unexpected end of data\)"),
    ("articolo,sintesi\nA,B\n", r"data.csv:1: header is \['articolo', 'sintesi'\]; expected a header row with columns 'source' and 'target'"),
    ("source,target\nA,B,C\n", r"data.csv:2: 3 fields; expected 2 as in the header"),
    ("source,target,source\nA,B,C\n", r"names 'source' or 'target' twice"),
    ("", r"empty file"),
    ("source,target\nA\n", r"data.csv:2: 1 fields; expected 2"),
])
def test_bad_csv(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "sum").mkdir()
    (tmp_path / "sum" / "data.csv").write_text(content, "utf-8")
    with pytest.raises(SourceError, match=message):
        run_converter("sum", tmp_path / "sum", 0)


def test_byte_order_mark_and_column_order(tmp_path: Path) -> None:
    (tmp_path / "sum").mkdir()
    (tmp_path / "sum" / "data.csv").write_bytes("\ufeffTarget,Source\r\nS1,A1\r\nS2,A2\r\n".encode("utf-8"))
    pairs, _ = run_converter("sum", tmp_path / "sum", 0)
    assert sorted(rec["source"] for _, rec in pairs) == ["A1", "A2"]
    assert sorted(rec["target"] for _, rec in pairs) == ["S1", "S2"]


def test_no_csv_is_missing_source(tmp_path: Path) -> None:
    (tmp_path / "sum").mkdir()
    with pytest.raises(MissingSource):
        run_converter("sum", tmp_path / "sum", 0)

"""Issue 11 (data side): inputs never written, no split vanishes, duplicate keys, safe paths,
--seed as documented, every failure one clear line (traceback only with --debug)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from evalita_data.cli import main
from evalita_data.building.pipeline import build

from clear_errors import assert_one_clear_line
from test_build_errors import tree_digest
from paths import TEST_DATA


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


# ---------------------------------------------------------------- 1. inputs are read-only


@pytest.mark.parametrize("where", ["same", "inside", "containing", "symlink"])
def test_build_refuses_an_out_that_overlaps_the_raw_folder(where: str, raw_copy, tmp_path: Path) -> None:
    raw = raw_copy("wic")
    before = tree_digest(raw)
    out = {"same": raw, "inside": raw / "wic" / "out", "containing": raw.parent, "symlink": tmp_path / "link"}[where]
    if where == "symlink":
        out.symlink_to(raw)
    result = invoke("build", "--raw", raw, "--out", out, "--task", "wic")
    assert_one_clear_line(result, "inputs are never written" if where != "containing" else "would destroy the inputs")
    assert tree_digest(raw) == before
    assert not (raw / "wic" / "out").exists() and not (raw / "manifest.json").exists()


def test_push_to_dir_refuses_the_build_folder(raw_copy, tmp_path: Path) -> None:
    build(raw_copy("te"), tmp_path / "build", tasks=["te"], progress=False)
    before = tree_digest(tmp_path / "build")
    for dest in (tmp_path / "build", tmp_path / "build" / "te", tmp_path):
        assert_one_clear_line(invoke("push", "--build", tmp_path / "build", "--to-dir", dest), "--to-dir")
    assert tree_digest(tmp_path / "build") == before


# ---------------------------------------------------------------- 3. no split vanishes


def _built(raw: Path, out: Path, task: str) -> dict:
    result = invoke("build", "--raw", raw, "--out", out, "--task", task)
    assert result.exit_code == 0, result.output
    return tree_digest(out)


@pytest.mark.parametrize("task,name,content,why", [
    ("wic", "binary/train.jsonl", "", "empty file (0 bytes)"),
    ("sa", "sentipolc16_officialdistrib_train.csv", None, "only one line"),
    ("ner", "FIC_train.tsv", "", "empty file (0 bytes)"),
    ("hs", "haspeede2_dev_taskAB.tsv", None, "only one line"),
])
def test_an_empty_or_header_only_input_is_an_error_naming_it(task: str, name: str, content: str | None, why: str,
                                                             raw_copy, tmp_path: Path) -> None:
    raw, out = raw_copy(task), tmp_path / "build"
    before = _built(raw, out, task)
    path = raw / task / name
    path.write_text(content if content is not None else path.read_text("utf-8").splitlines()[0] + "\n", "utf-8")
    line = assert_one_clear_line(invoke("build", "--raw", raw, "--out", out, "--task", task), str(path), why)
    assert "would be empty" in line
    assert tree_digest(out) == before  # the old split is kept


def test_validate_flags_an_empty_split_file(raw_copy, tmp_path: Path) -> None:
    out = tmp_path / "build"
    build(raw_copy("wic"), out, tasks=["wic"], progress=False)
    copy = tmp_path / "copy"
    shutil.copytree(out, copy, symlinks=False)
    (copy / "wic" / "dev.jsonl").write_text("")
    result = invoke("validate", copy)
    assert result.exit_code == 1
    assert f"{copy / 'wic' / 'dev.jsonl'}: empty file" in result.output


# ---------------------------------------------------------------- 4. duplicate keys


def test_a_duplicate_key_in_a_raw_json_record_is_an_error_with_file_and_line(raw_copy, tmp_path: Path) -> None:
    raw = raw_copy("wic")
    path = raw / "wic" / "binary" / "train.jsonl"
    lines = path.read_text("utf-8").splitlines()
    rec = json.loads(lines[2])
    lines[2] = lines[2][:-1] + f', "label": {json.dumps(1 - rec["label"] if isinstance(rec.get("label"), int) else 0)}}}'
    path.write_text("\n".join(lines) + "\n", "utf-8")
    assert_one_clear_line(invoke("build", "--raw", raw, "--out", tmp_path / "b", "--task", "wic"), f"{path}:3:", "duplicate key")


def test_validate_reports_a_duplicate_key_and_bad_json_with_their_line(tmp_path: Path) -> None:
    good = (TEST_DATA / "build" / "te" / "test.jsonl").read_text("utf-8").splitlines()
    dup = tmp_path / "te" / "dup.jsonl"
    dup.parent.mkdir()
    key, value = list(json.loads(good[1]).items())[-1]
    dup.write_text(good[0] + "\n" + good[1][:-1] + f", {json.dumps(key)}: {json.dumps(value)}}}\n", "utf-8")
    result = invoke("validate", dup)
    assert result.exit_code == 1
    assert f"{dup}:2: duplicate key {key!r}" in result.output
    bad = tmp_path / "te" / "bad.jsonl"
    bad.write_text(good[0] + "\n{not json\n", "utf-8")
    result = invoke("validate", bad)
    assert result.output.startswith(f"{bad}:2: not valid JSON"), result.output
    assert ":0:" not in result.output and "(file)" not in result.output


# ---------------------------------------------------------------- 5. paths from data


def test_push_refuses_a_split_key_that_leaves_the_target(raw_copy, tmp_path: Path) -> None:
    out = tmp_path / "build"
    build(raw_copy("te"), out, tasks=["te"], progress=False)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text("utf-8"))
    manifest["tasks"]["te"]["splits"]["../../../x"] = dict(manifest["tasks"]["te"]["splits"]["test"], file="../../../x.jsonl")
    manifest_path.unlink()  # a link into the version folder: write a plain file in its place
    manifest_path.write_text(json.dumps(manifest), "utf-8")
    hub = tmp_path / "deep" / "er" / "hub"
    assert_one_clear_line(invoke("push", "--build", out, "--to-dir", hub), "split name '../../../x' is not allowed")
    assert not (tmp_path / "x.parquet").exists() and not (tmp_path / "deep" / "x.parquet").exists()
    assert not hub.exists()


@pytest.mark.parametrize("org", ["../../x", "a/b", "-x", "x..y", ""])
def test_an_invalid_org_is_one_line_and_writes_nothing(org: str, raw_copy, tmp_path: Path) -> None:
    out = tmp_path / "build"
    build(raw_copy("te"), out, tasks=["te"], progress=False)
    for args in (["--to-dir", str(tmp_path / "hub")], ["--dry-run"]):
        assert_one_clear_line(invoke("push", "--build", out, "--org", org, *args), "not a valid Hub name")
    assert not (tmp_path / "hub").exists()


# ---------------------------------------------------------------- 7. one clear line


def test_wrong_raw_level_and_empty_raw_folder_fail(raw_copy, tmp_path: Path) -> None:
    raw = raw_copy("wic")
    assert_one_clear_line(invoke("build", "--raw", raw / "wic", "--out", tmp_path / "b"), "looks like the folder of one task")
    (tmp_path / "empty").mkdir()
    assert_one_clear_line(invoke("build", "--raw", tmp_path / "empty", "--out", tmp_path / "b"), "holds no folder of")
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("payload,fragment", [
    (b"PK\x03\x04 not really a zip", "cannot open as an Excel .xlsx workbook"),
    (b"", "cannot open as an Excel .xlsx workbook"),
])
def test_a_corrupt_workbook_is_one_line_naming_it(payload: bytes, fragment: str, raw_copy, tmp_path: Path) -> None:
    raw = raw_copy("at")
    path = raw / "at" / "SSM_2017.xlsx"
    path.write_bytes(payload)
    assert_one_clear_line(invoke("build", "--raw", raw, "--out", tmp_path / "b", "--task", "at"), str(path), fragment)


def test_a_workbook_with_a_broken_part_is_one_line_naming_it(raw_copy, tmp_path: Path) -> None:
    import zipfile

    raw = raw_copy("at")
    path = raw / "at" / "SSM_2017.xlsx"
    with zipfile.ZipFile(path) as zin:
        parts = {n: zin.read(n) for n in zin.namelist()}
    sheet = next(n for n in parts if n.startswith("xl/worksheets/sheet"))
    parts[sheet] = b"<worksheet><sheetData><row r='1'><c r='A1' t='n'><v>not a number</v></c></row>"
    with zipfile.ZipFile(path, "w") as zout:
        for n, data in parts.items():
            zout.writestr(n, data)
    assert_one_clear_line(invoke("build", "--raw", raw, "--out", tmp_path / "b", "--task", "at"), str(path), ".xlsx")


def test_validate_a_task_folder(raw_copy, tmp_path: Path) -> None:
    out = tmp_path / "build"
    build(raw_copy("wic"), out, tasks=["wic"], progress=False)
    result = invoke("validate", out / "wic")
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "ok: 3 file(s) valid"


def test_debug_shows_the_traceback(tmp_path: Path, monkeypatch) -> None:
    from evalita_data.building import pipeline

    def boom(*_a, **_k):
        raise RuntimeError("an unexpected failure")

    monkeypatch.setattr(pipeline, "build", boom)
    plain = invoke("build", "--raw", tmp_path, "--out", tmp_path / "b")
    assert_one_clear_line(plain, "RuntimeError: an unexpected failure")
    debug = CliRunner().invoke(main, ["--debug", "build", "--raw", str(tmp_path), "--out", str(tmp_path / "b")])
    assert isinstance(debug.exception, RuntimeError)


# ---------------------------------------------------------------- 8. --seed


def test_seed_changes_only_faq_distractors_and_at_letters(raw_copy, tmp_path: Path) -> None:
    raw = raw_copy("ner", "rel", "faq")
    build(raw, tmp_path / "s0", progress=False)
    build(raw, tmp_path / "s5", seed=5, progress=False)
    a, b = tree_digest(tmp_path / "s0"), tree_digest(tmp_path / "s5")
    changed = sorted(k for k in a if k.endswith(".jsonl") and a[k] != b.get(k))
    assert changed == ["faq/dev.jsonl", "faq/test.jsonl"]


def test_card_refuses_an_invalid_org(raw_copy, tmp_path: Path) -> None:
    build(raw_copy("te"), tmp_path / "build", tasks=["te"], progress=False)
    assert_one_clear_line(invoke("card", "te", "--build", tmp_path / "build", "--org", "../../x"), "not a valid Hub name")


def test_a_build_removes_what_killed_builds_left(raw_copy, tmp_path: Path) -> None:
    raw, out = raw_copy("te"), tmp_path / "build"
    old_style = tmp_path / ".build.tmp-k1ll3d"  # the temporary folder of an older evalita-data, killed
    (old_style / "te").mkdir(parents=True)
    stale = tmp_path / ".build.versions" / "20260101T000000-1-abcdef"  # a version a killed build never switched to
    stale.mkdir(parents=True)
    build(raw, out, tasks=["te"], progress=False)
    assert not old_style.exists() and not stale.exists()
    assert sorted(p.name for p in (tmp_path / ".build.versions").iterdir()) == [".lock", Path(os.readlink(out)).name]

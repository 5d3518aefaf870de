"""Byte-identical rebuilds, the manifest, validate, and the CLI end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_data.cli import main
from evalita_data.schema_check import record_problems

from test_build_errors import tree_digest


def test_two_builds_are_byte_identical(samples_raw: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    for name in ("a", "b"):
        result = runner.invoke(main, ["build", "--raw", str(samples_raw), "--out", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
    a, b = tree_digest(tmp_path / "a"), tree_digest(tmp_path / "b")
    assert a == b
    assert "wic/train.jsonl" in a and "manifest.json" in a


def test_manifest_describes_inputs_and_outputs(samples_raw: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    CliRunner().invoke(main, ["build", "--raw", str(samples_raw), "--out", str(out), "--task", "wic"])
    manifest = json.loads((out / "manifest.json").read_text())
    wic = manifest["tasks"]["wic"]
    assert wic["tool_version"] == "0.1.0" and wic["seed"] == 0
    assert sorted(wic["inputs"]) == ["binary/dev.jsonl", "binary/test.jsonl", "binary/train.jsonl", "gold_truth/binary/test.jsonl"]
    size = (samples_raw / "wic/binary/dev.jsonl").stat().st_size
    assert wic["inputs"]["binary/dev.jsonl"]["bytes"] == size
    import hashlib
    assert wic["splits"]["dev"]["sha256"] == hashlib.sha256((out / "wic/dev.jsonl").read_bytes()).hexdigest()
    # UTF-8, not ASCII-escaped.
    assert "né" in (out / "wic/dev.jsonl").read_text("utf-8")


@pytest.mark.smoke
def test_several_tasks_after_one_option(samples_raw: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    result = CliRunner().invoke(main, ["build", "--raw", str(samples_raw), "--out", str(out), "--task", "wic", "sa", "hs"])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(manifest["tasks"]) == ["hs", "sa", "wic"]


def test_rebuilding_one_task_keeps_the_others(samples_raw: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    runner = CliRunner()
    runner.invoke(main, ["build", "--raw", str(samples_raw), "--out", str(out), "--task", "wic", "--task", "sa"])
    runner.invoke(main, ["build", "--raw", str(samples_raw), "--out", str(out), "--task", "sa"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert {"wic", "sa"} <= set(manifest["tasks"]) and (out / "wic/train.jsonl").is_file()


@pytest.mark.smoke
def test_validate_reports_file_line_field(samples_raw: Path, tmp_path: Path) -> None:
    out = tmp_path / "o"
    runner = CliRunner()
    runner.invoke(main, ["build", "--raw", str(samples_raw), "--out", str(out), "--task", "wic", "--task", "hs"])
    ok = runner.invoke(main, ["validate", str(out)])
    assert ok.exit_code == 0 and "ok: 4 file(s) valid" in ok.output
    dev = out / "hs/dev.jsonl"
    lines = dev.read_text("utf-8").splitlines()
    rec = json.loads(lines[1])
    rec["hs"] = "1"
    lines[1] = json.dumps(rec, ensure_ascii=False)
    lines[2] = lines[0]  # duplicate id
    dev.write_text("\n".join(lines) + "\n", "utf-8")
    bad = runner.invoke(main, ["validate", str(out)])
    assert bad.exit_code == 1
    assert f"{dev}:2: hs: '1' is not of type 'integer'" in bad.output
    assert f"{dev}:3: id: duplicate id '8723' (first on line 1)" in bad.output
    one = runner.invoke(main, ["validate", str(dev)])
    assert one.exit_code == 1 and ":2: hs:" in one.output


def test_schema_accepts_and_rejects() -> None:
    good = {"id": "x.noun.1", "lemma": "x", "sentence1": "a x b", "sentence2": "x c",
            "start1": 2, "end1": 3, "start2": 0, "end2": 1, "label": 1}
    assert record_problems("wic", good) == []
    assert record_problems("wic", {**good, "extra": 1}) == ["(record): Additional properties are not allowed ('extra' was unexpected)"]
    assert record_problems("wic", {**good, "label": 2}) == ["label: 2 is not one of [0, 1]"]
    assert record_problems("wic", {**good, "end1": 9}) == ["start1/end1: span 2:9 is not inside sentence1 (length 5)"]
    assert record_problems("wic", {k: v for k, v in good.items() if k != "lemma"}) == ["(record): 'lemma' is a required property"]
    te = {"id": "1", "entailment": "SI", "text1": "a", "text2": "b"}
    assert record_problems("te", te) == []
    assert record_problems("te", {**te, "entailment": "YES"}) == ["entailment: 'YES' is not one of ['SI', 'NO']"]
    assert record_problems("te", {**te, "text1": "  "}) != []
    hs = {"id": "12", "full_text": "t", "hs": 1, "stereotype": 0}
    assert record_problems("hs", hs) == [] and record_problems("hs", {**hs, "hs": True}) != []
    sa = {"idtwitter": "1", "subj": "1", "opos": "1", "oneg": "0", "iro": "0", "lpos": "1", "lneg": "0", "top": "0", "text": "t"}
    assert record_problems("sa", sa) == [] and record_problems("sa", {**sa, "opos": 1}) != []


def test_unknown_task_and_missing_raw(tmp_path: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(main, ["build", "--task", "xx"])
    assert r.exit_code == 2 and "xx" in r.output
    r = runner.invoke(main, ["build", "--raw", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 1 and "does not exist" in r.output


def test_missing_sum_points_to_the_fetch_command_the_readme_names(tmp_path: Path) -> None:
    """Issue 40: the build said "Export ARTeLab/fanpage ... to CSV" where the README says `evalita-data fetch sum`."""
    (tmp_path / "raw" / "sum").mkdir(parents=True)
    r = CliRunner().invoke(main, ["build", "--raw", str(tmp_path / "raw"), "--out", str(tmp_path / "o"), "--task", "sum"])
    assert r.exit_code == 1
    assert ("sum: NOT BUILT (missing) - sum: missing *.csv (columns source,target). Run `evalita-data fetch sum` "
            "(downloads ARTeLab/fanpage from the Hugging Face Hub into raw/sum/fanpage.csv).") in r.output
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text("utf-8")
    assert "`evalita-data fetch sum`" in readme

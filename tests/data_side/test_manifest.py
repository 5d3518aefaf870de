"""The typed build manifest: it writes the bytes the build always wrote, reads them back to the
same values, and a malformed field is one line naming the file and the field, for every reader."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evalita_data.building.pipeline import build
from evalita_data.hub.layout import BuildRefused, load_checked_manifest
from evalita_data.manifest import MANIFEST_FILE, BuildManifest, BuildReport, ManifestError, MissingPart, read_published
from evalita_data.validate import validate_path
from evalita_eval.sources.base import DataMismatch
from evalita_eval.sources.entries import select_entries
from evalita_eval.sources.folder import FolderSource
from paths import TEST_DATA
from publish_fixtures import make_ner_build

RAW = TEST_DATA / "raw"


@pytest.fixture(scope="module")
def wic_build(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("manifest") / "build"
    build(RAW, out, tasks=["wic"], progress=False)
    return out


def test_the_build_manifest_reads_back_to_its_own_bytes(wic_build: Path) -> None:
    path = wic_build / MANIFEST_FILE
    manifest = BuildManifest.read(path)
    assert manifest.dumps().encode("utf-8") == path.read_bytes()
    assert manifest.to_json() == json.loads(path.read_text("utf-8"))
    assert list(manifest.tasks) == ["wic"] and manifest.not_built == {} and manifest.format == 1
    for key, split in manifest.tasks["wic"].splits.items():
        lines = (wic_build / "wic" / split.file).read_bytes().count(b"\n")
        assert split.file == f"{key}.jsonl" and split.rows == lines and len(split.sha256) == 64
    assert manifest.tasks["wic"].tool == "evalita-data"


def test_a_hand_made_entry_keeps_every_key_and_the_published_manifest_names_its_task(tmp_path: Path) -> None:
    path = make_ner_build(tmp_path / "ner") / MANIFEST_FILE
    entry = BuildManifest.read(path).tasks["ner"]
    assert entry.seed == 0 and entry.inputs == {"ADG_train.tsv": {"bytes": 10, "sha256": "0" * 64}}
    assert entry.splits["adg/train"].rows == 2 and entry.report == BuildReport(
        dropped={"sentence without tokens": 2}, repaired={}, examples={}, missing=[], notes={})
    data = json.loads(path.read_text("utf-8"))["tasks"]["ner"]
    data["added later"] = [1]  # a key this version does not know is written back, not dropped
    published = tmp_path / "published.json"
    published.write_text(json.dumps({"task": "ner", **data}), "utf-8")
    assert read_published(published).published_json("ner") == {"task": "ner", **data}


def test_the_report_section_is_typed_and_a_hand_made_one_is_written_back_as_read(tmp_path: Path) -> None:
    build(RAW, tmp_path / "hs", tasks=["hs"], progress=False)  # the fixtures lack HaSpeeDe's gold test files
    (part,) = BuildManifest.read(tmp_path / "hs" / MANIFEST_FILE).tasks["hs"].missing_parts()
    assert part.splits == ["test_all", "test_tweets", "test_news"] and part.other == {}
    assert part.files == ["haspeede2_reference_taskAB-tweets.tsv", "haspeede2_reference_taskAB-news.tsv"]
    assert part.hint is not None and part.hint.startswith("The gold test labels are in haspeede2_reference.zip")
    # A hand-made report: a part without its hint, a section left out, a key this version does not know.
    hand_made = {"dropped": {"x": 1}, "missing": [{"files": ["a.tsv"], "splits": ["test"]}], "later": [2]}
    report = BuildReport.from_json(hand_made, "m.json", "report")
    assert report.missing == [MissingPart(["a.tsv"], ["test"], None)] and report.repaired is None and report.other == {"later": [2]}
    assert report.to_json() == hand_made


def _broken(wic_build: Path, tmp_path: Path, change) -> Path:
    """A copy of the build's manifest (beside the build's own files) with one field changed."""
    out = tmp_path / "broken"
    shutil.copytree(wic_build / "wic", out / "wic")
    data = json.loads((wic_build / MANIFEST_FILE).read_text("utf-8"))
    change(data)
    (out / MANIFEST_FILE).write_text(data if isinstance(data, str) else json.dumps(data), "utf-8")
    return out


CHANGES = [
    (lambda d: d["tasks"]["wic"]["splits"]["test"].update(rows="5"), 'field tasks.wic.splits.test.rows: expected an integer, found "5"'),
    (lambda d: d["tasks"]["wic"]["splits"]["test"].update(rows=True), "field tasks.wic.splits.test.rows: expected an integer, found true"),
    (lambda d: d["tasks"]["wic"]["splits"]["test"].pop("sha256"), "field tasks.wic.splits.test.sha256: missing"),
    (lambda d: d.update(tasks=[]), "field tasks: expected an object of tasks, found []"),
    (lambda d: d["tasks"]["wic"]["report"].update(missing="all"), 'field tasks.wic.report.missing: expected a list, found "all"'),
    (lambda d: d["not_built"].update(wic={"status": 1}), "field not_built.wic.status: expected a string, found 1"),
    (lambda d: d["tasks"]["wic"]["report"].update(dropped=[]), "field tasks.wic.report.dropped: expected an object, found []"),
    (lambda d: d["tasks"]["wic"]["report"].update(missing=[{"files": "a.tsv"}]),
     'field tasks.wic.report.missing[0].files: expected a list of strings, found "a.tsv"'),
]


@pytest.mark.parametrize(("change", "message"), CHANGES)
def test_a_malformed_field_is_one_line_naming_the_file_and_the_field(wic_build: Path, tmp_path: Path, change, message: str) -> None:
    path = _broken(wic_build, tmp_path, change) / MANIFEST_FILE
    with pytest.raises(ManifestError) as err:
        BuildManifest.read(path)
    assert str(err.value) == f"{path}: {message}"


def test_every_reader_refuses_a_malformed_manifest_naming_the_field(wic_build: Path, tmp_path: Path) -> None:
    broken = _broken(wic_build, tmp_path, CHANGES[0][0])
    path, field = broken / MANIFEST_FILE, "field tasks.wic.splits.test.rows: expected an integer"
    violations, _ = validate_path(broken)
    assert [str(v) for v in violations] == [f"{path}: not a build manifest: {CHANGES[0][1]}"]
    with pytest.raises(BuildRefused, match=f"not a build manifest: .*{field}"):
        load_checked_manifest(broken)
    (entry,) = select_entries(["wic"])
    with pytest.raises(DataMismatch, match=f"{field}.*nothing was evaluated"):
        FolderSource(broken).load(entry, "test")
    (broken / MANIFEST_FILE).write_text("{not json", "utf-8")
    with pytest.raises(DataMismatch, match="manifest.json: not valid JSON"):
        FolderSource(broken).load(entry, "test")

"""push --to-dir: the published layout loads with datasets exactly as built; Parquet is deterministic."""

from __future__ import annotations

import io
import json
import shutil

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

datasets = pytest.importorskip("datasets")

from evalita_data.cli import main  # noqa: E402
from evalita_data.hub.layout import BuildRefused, load_checked_manifest, task_repo  # noqa: E402
from evalita_data.hub.parquet import parquet_bytes, task_schema  # noqa: E402
from evalita_data.manifest import MANIFEST_FILE, BuildManifest  # noqa: E402
from evalita_data.hub.push import write_to_dir  # noqa: E402
from evalita_data.registry import TASK_IDS, get_task  # noqa: E402
from publish_fixtures import NER_RECORDS, built_tasks, make_ner_build, read_rows, sample_build  # noqa: E402,F401


def _load(path, cache, config=None):
    return datasets.load_dataset(str(path), config, cache_dir=str(cache))


def _assert_same_as_build(ds, build_dir, task, entry, config=None):
    expected_features = datasets.Features.from_dict(task_schema(task)[1])
    keys = [k for k in entry["splits"] if config is None or k.startswith(config + "/")]
    assert sorted(ds) == sorted(k.split("/")[-1] for k in keys)
    for key in keys:
        split = ds[key.split("/")[-1]]
        assert split.features == expected_features
        assert split.to_list() == read_rows(build_dir / task / entry["splits"][key]["file"])


@pytest.fixture(scope="module")
def published(sample_build, tmp_path_factory):
    out = tmp_path_factory.mktemp("published")
    result = CliRunner().invoke(main, ["push", "--build", str(sample_build), "--to-dir", str(out), "--jsonl"])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("task", TASK_IDS)
def test_to_dir_round_trip_gives_the_build(sample_build, published, task, tmp_path):
    if task not in built_tasks(sample_build):
        pytest.skip(f"{task} is not built from tests/data/raw")
    entry = json.loads((sample_build / MANIFEST_FILE).read_text("utf-8"))["tasks"][task]
    spec = get_task(task)
    for config in spec.configs or [None]:
        ds = _load(published / task, tmp_path / "cache", config)
        _assert_same_as_build(ds, sample_build, task, entry, config)
    # The JSONL copies are the build's bytes; the repository manifest is the task's entry.
    for key, split in entry["splits"].items():
        assert (published / task / "jsonl" / f"{key}.jsonl").read_bytes() == (sample_build / task / split["file"]).read_bytes()
    assert json.loads((published / task / "manifest.json").read_text("utf-8")) == {"task": task, **entry}


def test_build_folder_itself_loads_through_its_card(sample_build, tmp_path):
    ds = _load(sample_build / "wic", tmp_path / "cache")
    assert ds["train"].to_list() == read_rows(sample_build / "wic" / "train.jsonl")
    assert ds["train"].num_rows == 40


def test_ner_configs_load_per_domain(tmp_path):
    build_dir = make_ner_build(tmp_path / "build")
    write_to_dir(build_dir, tmp_path / "hub", echo=lambda _m: None)
    entry = json.loads((build_dir / MANIFEST_FILE).read_text("utf-8"))["tasks"]["ner"]
    assert sorted(p.relative_to(tmp_path / "hub" / "ner").as_posix() for p in (tmp_path / "hub" / "ner").rglob("*.parquet")) == [
        "data/adg/dev.parquet", "data/adg/test.parquet", "data/adg/train.parquet", "data/adg/trial.parquet",
        "data/fic/test.parquet", "data/fic/train.parquet", "data/wn/test.parquet"]
    for domain in NER_RECORDS:
        ds = _load(tmp_path / "hub" / "ner", tmp_path / "cache", domain)
        _assert_same_as_build(ds, build_dir, "ner", entry, domain)
    adg = _load(tmp_path / "hub" / "ner", tmp_path / "cache", "adg")
    assert adg["train"][0]["entities"] == [{"entity_text": "Mario Rossi", "type": "PER"}, {"entity_text": "Roma", "type": "LOC"}]
    assert adg["train"][1]["entities"] == []


def test_rel_pairs_and_ls_answers_keep_their_types():
    rel = [{"text": "Emoglobina 12 g/dl.", "relations": [["12 g/dl", "Emoglobina"]]}, {"text": "Nulla.", "relations": []}]
    table = pq.read_table(io.BytesIO(parquet_bytes("rel", rel)))
    assert table.to_pylist() == rel
    ls = [{"id": "1", "context": "una <head>bella</head> casa", "head": "bella", "lexelt": "bello.a", "lexelt_lemma": "bello",
           "answers": [{"word": "carino", "count": 3}]}]
    assert pq.read_table(io.BytesIO(parquet_bytes("ls", ls))).to_pylist() == ls
    assert str(task_schema("rel")[0].field("relations").type) == "list<item: list<item: string>>"


def test_parquet_and_repository_are_byte_identical_across_runs(sample_build):
    entry = BuildManifest.read(sample_build / MANIFEST_FILE).tasks["wic"]
    first = task_repo(sample_build, "wic", entry)
    second = task_repo(sample_build, "wic", entry)
    assert [(f.path, f.sha256) for f in first.files] == [(f.path, f.sha256) for f in second.files]
    meta = pq.read_metadata(io.BytesIO(dict((f.path, f.data) for f in first.files)["data/train.parquet"]))
    assert set(meta.metadata) == {b"huggingface", b"ARROW:schema"}  # nothing time-dependent


def test_invalid_or_manifestless_build_is_refused(sample_build, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(sample_build, broken)
    lines = (broken / "wic" / "dev.jsonl").read_text("utf-8").splitlines()
    rec = json.loads(lines[3])
    rec["label"] = 2
    lines[3] = json.dumps(rec, ensure_ascii=False)
    (broken / "wic" / "dev.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    with pytest.raises(BuildRefused, match=r"dev.jsonl:4: label"):
        load_checked_manifest(broken)
    result = CliRunner().invoke(main, ["push", "--build", str(broken), "--to-dir", str(tmp_path / "out")])
    assert result.exit_code == 1 and "validation problem" in result.output
    assert not (tmp_path / "out").exists()

    (broken / MANIFEST_FILE).unlink()
    with pytest.raises(BuildRefused, match="no manifest"):
        load_checked_manifest(broken)


def test_split_edited_after_build_is_refused(sample_build, tmp_path):
    edited = tmp_path / "edited"
    shutil.copytree(sample_build, edited)
    path = edited / "hs" / "dev.jsonl"
    lines = path.read_text("utf-8").splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n", "utf-8")  # still valid, one record fewer
    with pytest.raises(BuildRefused, match=r"sha256 [0-9a-f]+… differs from .*the file changed after the build"):
        load_checked_manifest(edited, ["hs"])
    ner_only = make_ner_build(tmp_path / "ner-only")
    with pytest.raises(BuildRefused, match="task\\(s\\) wic not in the build; built: ner"):
        load_checked_manifest(ner_only, ["wic"])

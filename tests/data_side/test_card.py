"""Dataset cards: license mapping, YAML front matter, configs that match the files."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from evalita_data.card import CARD, HubLicense, hub_license, parse_front_matter, size_category
from evalita_data.cli import main
from evalita_data.hub.layout import task_repo
from evalita_data.manifest import MANIFEST_FILE, BuildManifest, BuiltTask
from evalita_data.registry import TASK_IDS, get_task
from hub_stub import KNOWN_LICENSES
from publish_fixtures import built_tasks, make_ner_build, sample_build  # noqa: F401 - fixture


@pytest.mark.parametrize("text, expected", [
    ("CC BY-NC-SA 4.0", HubLicense(("cc-by-nc-sa-4.0",))),
    ("CC BY-NC 4.0", HubLicense(("cc-by-nc-4.0",))),
    ("CC BY-NC-SA 4.0 (ADG); CC BY-NC 4.0 (FIC, WN)", HubLicense(("cc-by-nc-sa-4.0", "cc-by-nc-4.0"))),
    ("CC BY-NC-SA 3.0 IT (tweets also under Twitter's terms)",
     HubLicense(("other",), "cc-by-nc-sa-3.0-it", "https://creativecommons.org/licenses/by-nc-sa/3.0/it/")),
    ("unknown (the source repository states none)", HubLicense(("unknown",))),
    ("see the original distribution (not public)", HubLicense(("other",), "see-the-original-distribution-not-public")),
])
def test_license_strings_map_to_hub_ids(text, expected):
    assert hub_license(text) == expected


@pytest.mark.parametrize("task", TASK_IDS)
def test_every_registry_license_is_a_hub_license(task):
    lic = hub_license(get_task(task).license)
    assert set(lic.ids) <= KNOWN_LICENSES
    assert ("other" in lic.ids) == (lic.name is not None)


def test_size_categories_at_their_bounds():
    assert [size_category(n) for n in (0, 999, 1000, 9999, 10_000, 100_000, 1_000_000)] == [
        "n<1K", "n<1K", "1K<n<10K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M"]


def _published_card(build_dir, task):
    entry = json.loads((build_dir / MANIFEST_FILE).read_text("utf-8"))["tasks"][task]
    repo = task_repo(build_dir, task, BuiltTask.from_json(entry, "manifest"))
    files = {f.path: f.data for f in repo.files}
    return entry, files, files[CARD].decode("utf-8")


def test_sample_build_has_tasks(sample_build):
    # The round trips below are parametrised over what the samples build; at least these exist.
    assert {"wic", "sa", "hs"} <= set(built_tasks(sample_build))


@pytest.mark.parametrize("task", TASK_IDS)
def test_card_front_matter_matches_files_and_manifest(sample_build, task):
    if task not in built_tasks(sample_build):
        pytest.skip(f"{task} is not built from tests/data/raw")
    entry, files, card = _published_card(sample_build, task)
    meta = parse_front_matter(card)
    spec = get_task(task)
    assert meta["language"] == ["it"]
    assert meta["task_categories"] == spec.task_categories
    lic = hub_license(spec.license)
    assert meta["license"] == (lic.ids[0] if len(lic.ids) == 1 else list(lic.ids))
    total = sum(s["rows"] for s in entry["splits"].values())
    assert meta["size_categories"] == [size_category(total)]
    # Every data file named by the configs is in the repository, and every split of the manifest is named once.
    named = [(c["config_name"], d["split"], d["path"]) for c in meta["configs"] for d in c["data_files"]]
    assert sorted(p for _, _, p in named) == sorted(p for p in files if p.startswith("data/"))
    keys = [s if c == "default" else f"{c}/{s}" for c, s, _ in named]
    assert sorted(keys) == sorted(entry["splits"])
    # Split sizes as rows of the table: "| split | rows | paper rows | `file` |".
    for key, split in entry["splits"].items():
        assert f"| {key} | {split['rows']} | {spec.paper_splits.get(key, '')} |" in card
    for prompt in spec.prompts:
        assert f"**{prompt.name}**" in card


def test_build_writes_card_next_to_splits_pointing_at_jsonl(sample_build):
    card = (sample_build / "wic" / CARD).read_text("utf-8")
    meta = parse_front_matter(card)
    assert meta["configs"] == [{"config_name": "default", "data_files": [
        {"split": "train", "path": "train.jsonl"}, {"split": "dev", "path": "dev.jsonl"}, {"split": "test", "path": "test.jsonl"}]}]
    assert "| train | 40 | 2805 | `train.jsonl` |" in card
    assert "license: unknown" in card


def test_ner_card_has_one_config_per_domain(tmp_path):
    build_dir = make_ner_build(tmp_path / "build")
    _, files, card = _published_card(build_dir, "ner")
    meta = parse_front_matter(card)
    assert meta["license"] == ["cc-by-nc-sa-4.0", "cc-by-nc-4.0"]
    assert [c["config_name"] for c in meta["configs"]] == ["adg", "fic", "wn"]
    assert meta["configs"][0]["data_files"] == [
        {"split": "train", "path": "data/adg/train.parquet"}, {"split": "dev", "path": "data/adg/dev.parquet"},
        {"split": "trial", "path": "data/adg/trial.parquet"}, {"split": "test", "path": "data/adg/test.parquet"}]
    assert meta["configs"][2]["data_files"] == [{"split": "test", "path": "data/wn/test.parquet"}]
    assert "| sentence without tokens | 2 |" in card  # dropped counts from the manifest
    assert "| fic/test | 2 | 1517 | `data/fic/test.parquet` |" in card
    assert 'load_dataset("evalita-llm/ner", "adg")' in card


def test_card_is_deterministic(sample_build, tmp_path):
    from evalita_data.building.pipeline import build
    from publish_fixtures import RAW_SAMPLES

    again = tmp_path / "again"
    build(RAW_SAMPLES, again, tasks=["wic"], progress=False)
    assert (again / "wic" / CARD).read_bytes() == (sample_build / "wic" / CARD).read_bytes()


def test_card_command_prints_published_card(sample_build):
    result = CliRunner().invoke(main, ["card", "sa", "--build", str(sample_build), "--org", "my-org"])
    assert result.exit_code == 0, result.output
    meta = parse_front_matter(result.output)
    assert meta["license"] == "other" and meta["license_name"] == "cc-by-nc-sa-3.0-it"
    assert 'load_dataset("my-org/sa")' in result.output
    assert "| train | 50 | 7410 | `data/train.parquet` |" in result.output


def test_card_command_for_unbuilt_task_fails(tmp_path):
    build_dir = make_ner_build(tmp_path / "build")  # only ner is built there
    result = CliRunner().invoke(main, ["card", "wic", "--build", str(build_dir)])
    assert result.exit_code == 1
    assert "wic is not in" in result.output


def test_card_lists_raw_files_or_summarises_many(tmp_path):
    from evalita_data.card import render_card

    entry = BuildManifest.read(make_ner_build(tmp_path / "build") / MANIFEST_FILE).tasks["ner"]
    paths = {k: f"data/{k}.parquet" for k in entry.splits}
    assert f"| `ADG_train.tsv` | 10 | `{'0' * 64}` |" in render_card("ner", entry, paths)
    entry.inputs = {f"doc{i:02d}.tsv": {"bytes": 100, "sha256": "1" * 64} for i in range(25)}
    card = render_card("ner", entry, paths)
    assert "Raw files read: 25 files, 2500 bytes in all; the sha256 of each is in `manifest.json`." in card
    assert "doc00.tsv" not in card

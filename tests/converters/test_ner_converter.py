"""KIND IOB -> sentence records: real sentences, repairs, bad input, the build."""

import json
from collections import Counter
from pathlib import Path

import pytest

from evalita_data.converters.ner import REPAIR_I, convert
from evalita_data.errors import MissingSource, SourceError
from evalita_data.building.pipeline import build
from evalita_data.building.conversion_report import ConversionReport
from evalita_data.schema_check import record_problems

from paths import ROOT, TEST_DATA
from convert_helpers import run_converter

SAMPLES = TEST_DATA / "raw" / "ner"
FULL = ROOT / "raw" / "ner"


def run(folder: Path, seed: int = 0) -> tuple[dict[str, list[dict]], ConversionReport]:
    return run_converter(convert, folder, seed)


@pytest.fixture(scope="module")
def samples():
    return run(SAMPLES)


def test_sample_counts_and_repair(samples):
    splits, report = samples
    assert {s: len(v) for s, v in splits.items()} == {
        f"{d}/{s}": 5 if s == "trial" else 25 for d in ("adg", "fic", "wn") for s in ("train", "dev", "trial", "test")
    }
    # WN_test sentence 1979 starts with I-PER (line 205 of the excerpt).
    assert report.repaired == Counter({REPAIR_I: 1})
    assert report.examples[f"repaired: {REPAIR_I}"] == ["WN_test.tsv:205"]


def test_apostrophe_and_entity_at_end(samples):
    assert samples[0]["wn/test"][11] == {
        "text": "«Quest'estate sposo Laura.",
        "entities": [{"entity_text": "Laura", "type": "PER"}],
    }


def test_multi_token_entities_at_start_and_repaired_i_tag(samples):
    wn = samples[0]["wn/test"]
    assert wn[7]["entities"][0] == {"entity_text": "Silvio Berlusconi", "type": "PER"}
    assert wn[7]["text"].startswith("Silvio Berlusconi e Mario Monti a Milano, Pier Luigi Bersani a Piacenza")
    assert [e["entity_text"] for e in wn[7]["entities"]] == [
        "Silvio Berlusconi", "Mario Monti", "Milano", "Pier Luigi Bersani", "Piacenza", "Beppe Grillo", "Genova"
    ]
    # The sentence whose first label is I-PER: "Vasco Rossi" is still one entity.
    assert wn[9] == {
        "text": "Vasco Rossi alla fine ha ceduto e si sposerà quest'estate con Laura Schmidt, al suo fianco da venticinque anni.",
        "entities": [{"entity_text": "Vasco Rossi", "type": "PER"}, {"entity_text": "Laura Schmidt", "type": "PER"}],
    }


def test_sentence_without_entities(samples):
    assert samples[0]["adg/train"][0] == {"text": "c'è un problema economico e ce n'è uno politico.", "entities": []}


def test_trial_is_seeded_from_dev_sentences_with_entities(samples):
    splits, _ = samples
    for d in ("adg", "fic", "wn"):
        trial = splits[f"{d}/trial"]
        assert all(rec in splits[f"{d}/dev"] and rec["entities"] for rec in trial)
    assert run(SAMPLES, seed=0)[0]["adg/trial"] == splits["adg/trial"]
    # The trial split uses the fixed TRIAL_SEED: --seed never moves it (docs/converters-constructed.md).
    assert run(SAMPLES, seed=1)[0]["adg/trial"] == splits["adg/trial"]


def test_every_entity_is_a_substring_and_records_are_valid(samples):
    for split, recs in samples[0].items():
        for rec in recs:
            assert record_problems("ner", rec) == [], (split, rec)


def test_record_check_catches_missing_and_misordered_entities():
    rec = {"text": "Roma e Milano", "entities": [{"entity_text": "Milano", "type": "LOC"}, {"entity_text": "Roma", "type": "LOC"}]}
    assert record_problems("ner", rec) == ["entities.1.entity_text: 'Roma' is not after the previous entity in text"]
    rec = {"text": "Roma", "entities": [{"entity_text": "Torino", "type": "LOC"}]}
    assert record_problems("ner", rec) == ["entities.0.entity_text: 'Torino' does not occur in text"]
    assert record_problems("ner", {"text": "Roma ", "entities": []})[0].startswith("text: ")


@pytest.mark.parametrize(
    "content, line, message",
    [
        (b"Roma\tB-LOC\n\nTorino\tB-MISC\n", 3, "label is 'B-MISC'"),
        (b"Roma\tB-LOC\tx\n", 1, "expected 2 TAB-separated fields"),
        (b"Roma\n", 1, "expected 2 TAB-separated fields"),
        (b"Roma\tO\n\xe0\tO\n", 2, "not valid UTF-8"),
        (b"\tO\n", 1, "token '' is empty"),
    ],
)
def test_bad_input_names_file_and_line(raw_copy, content, line, message):
    folder = raw_copy("ner") / "ner"
    (folder / "FIC_train.tsv").write_bytes(content)
    with pytest.raises(SourceError) as err:
        run(folder)
    assert err.value.path.endswith("FIC_train.tsv")
    assert err.value.where == line
    assert message in err.value.message


def test_missing_test_file_is_reported_and_missing_train_fails(raw_copy):
    folder = raw_copy("ner") / "ner"
    (folder / "ADG_test.tsv").unlink()
    splits, report = run(folder)
    assert "adg/test" not in splits and len(splits["fic/test"]) == 25
    assert [m.splits for m in report.missing] == [["adg/test"]]
    (folder / "WN_dev.tsv").unlink()
    with pytest.raises(MissingSource, match="WN_dev.tsv"):
        run(folder)


def test_build_writes_config_folders_and_counts(tmp_path):
    summary = build(SAMPLES.parent, tmp_path / "out", tasks=["ner"], progress=False)
    assert [o.status for o in summary.outcomes] == ["built"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text("utf-8"))
    rows = {s: v["rows"] for s, v in manifest["tasks"]["ner"]["splits"].items()}
    assert rows["wn/trial"] == 5 and rows["adg/test"] == 25 and len(rows) == 12
    lines = (tmp_path / "out" / "ner" / "fic" / "dev.jsonl").read_text("utf-8").splitlines()
    assert len(lines) == 25


@pytest.mark.skipif(not FULL.is_dir(), reason="full KIND files not in raw/ner")
def test_full_data_counts():
    splits, report = run(FULL)
    assert {s: len(v) for s, v in splits.items()} == {
        "adg/train": 5147, "adg/dev": 1122, "adg/trial": 5, "adg/test": 521,
        "fic/train": 11423, "fic/dev": 1051, "fic/trial": 5, "fic/test": 1517,
        "wn/train": 10912, "wn/dev": 2594, "wn/trial": 5, "wn/test": 2088,
    }
    assert report.repaired == Counter({REPAIR_I: 16})
    # Entity counts of the KIND evalita-2023 README (train files).
    types = {d: Counter(e["type"] for rec in splits[f"{d}/train"] for e in rec["entities"]) for d in ("adg", "fic", "wn")}
    assert types == {
        "adg": {"LOC": 915, "PER": 889, "ORG": 1531},
        "fic": {"LOC": 587, "PER": 3177, "ORG": 137},
        "wn": {"LOC": 4800, "PER": 5325, "ORG": 4454},
    }

"""CLinkaRT PubTator + tokenised sentences -> sentence records."""

import json
import re
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalita_data.converters.rel import CROSS, OUTSIDE, convert, read_part
from evalita_data.errors import MissingSource, SourceError
from evalita_data.building.pipeline import build
from evalita_data.building.rawsource import RawSource
from evalita_data.building.conversion_report import ConversionReport
from evalita_data.schema_check import record_problems

from paths import ROOT, TEST_DATA
from convert_helpers import run_converter

SAMPLES = TEST_DATA / "raw" / "rel"
FULL = ROOT / "raw" / "rel"


def run(folder: Path, seed: int = 0) -> tuple[dict[str, list[dict]], ConversionReport]:
    return run_converter(convert, folder, seed)


def tokenize(text: str) -> list[list[tuple[int, int]]]:
    """Sentences of whitespace tokens, a sentence ending after a token that ends with '.'."""
    sentences, current = [], []
    for m in re.finditer(r"\S+", text):
        current.append(m.span())
        if m.group().endswith("."):
            sentences.append(current)
            current = []
    return sentences + ([current] if current else [])


def write_part(folder: Path, docs: dict[str, tuple[str, list[str]]], part: str = "training") -> None:
    """``docs``: docid -> (text, relation lines after '<docid> TAB REL TAB')."""
    (folder / f"{part}_tokenized").mkdir(parents=True, exist_ok=True)
    blocks = []
    for docid, (text, rels) in docs.items():
        blocks.append("\n".join([f"{docid}|t|{text}"] + [f"{docid}\tREL\t{r}" for r in rels]) + "\n")
        lines = []
        for s, sentence in enumerate(tokenize(text), 1):
            lines += [f"{s}-{t}\t{a}-{b}\t{text[a:b]}" for t, (a, b) in enumerate(sentence, 1)] + [""]
        (folder / f"{part}_tokenized" / f"{docid}.tsv").write_text("\n".join(lines[:-1]) + "\n", "utf-8")
    (folder / f"{part}.txt").write_text("\n".join(blocks) + "\n", "utf-8")


# Five sentences with a relation (the trial needs five) and one relation across sentences.
DOC = "PA 120 mmHg. FC 80 bpm. Hb 12 g/dl. PLT 200. Febbre 38°C. Glicemia normale. Poi 7 mg."
FIXTURE = {
    "D1": (DOC, ["3-11\t0-2\t120 mmHg\tPA", "16-22\t13-15", "27-34\t24-26", "40-43\t36-39", "52-56\t45-51",
                 "82-84\t58-66\tmg\tGlicemia"]),
    "D2": ("Nessun esame.", []),
}


@pytest.fixture(scope="module")
def samples():
    return run(SAMPLES)


def test_sample_counts_and_no_missing_relation(samples):
    splits, report = samples
    assert {s: len(v) for s, v in splits.items()} == {"train": 180, "trial": 5}
    assert sum(len(r["relations"]) for r in splits["train"]) == report.notes["training: documents / relations"][1]
    assert report.dropped == {}
    assert [m.splits for m in report.missing] == [["test"]]


def test_real_sentences(samples):
    train = samples[0]["train"]
    assert train[0] == {
        "text": "B.M., bambino caucasico di 11 mesi, giunto all’osservazione nel febbraio 2011 per porpora di n.d.d. e febbre (38,5°C) da 3 giorni.",
        "relations": [["38,5°C", "febbre"]],
    }
    assert train[1] == {
        "text": "Secondogenito di famiglia con basso livello socio-economico e con anamnesi remota e familiare negativa per patologie degne di nota.",
        "relations": [],
    }
    # A multi-token RML, and relations in document order (RML offsets, then EVENT offsets).
    gli_esami = next(r for r in train if r["text"].startswith("Gli esami virologici indicavano"))
    assert gli_esami["relations"] == [
        ["positività", "EBV-DNA"], ["1,83x106copie/ml", "EBV-DNA"], ["6,72x103copie/ml", "EBV-DNA"]
    ]
    assert ["735 x 103 / mm3", "PLT"] in next(r["relations"] for r in train if "(PLT: 735" in r["text"])


def test_trial_is_seeded_subset_of_train_with_relations(samples):
    splits, _ = samples
    assert all(rec in splits["train"] and rec["relations"] for rec in splits["trial"])
    assert run(SAMPLES, seed=0)[0]["trial"] == splits["trial"]
    # The trial split uses the fixed TRIAL_SEED: --seed never moves it (docs/converters-constructed.md).
    assert run(SAMPLES, seed=3)[0]["trial"] == splits["trial"]


def test_records_are_valid(samples):
    for rec in samples[0]["train"] + samples[0]["trial"]:
        assert record_problems("rel", rec) == []
    bad = {"text": "PA 120", "relations": [["130", "PA"]]}
    assert record_problems("rel", bad) == ["relations.0.0: RML '130' does not occur in text"]


def test_cross_sentence_relation_is_reported_with_its_document(tmp_path):
    write_part(tmp_path, FIXTURE)
    splits, report = run(tmp_path)
    assert [r["text"] for r in splits["train"]] == [
        "PA 120 mmHg.", "FC 80 bpm.", "Hb 12 g/dl.", "PLT 200.", "Febbre 38°C.", "Glicemia normale.", "Poi 7 mg.", "Nessun esame."
    ]
    assert [r["relations"] for r in splits["train"]] == [
        [["120 mmHg", "PA"]], [["80 bpm", "FC"]], [["12 g/dl", "Hb"]], [["200", "PLT"]], [["38°C", "Febbre"]], [], [], []
    ]
    assert report.dropped == {CROSS: 1}
    assert report.examples[f"dropped: {CROSS}"] == ["document D1, line 7"]
    assert report.notes["training: relations not inside one sentence, by document"] == {"D1": 1}


def test_mention_between_sentences_is_reported(tmp_path):
    # RML 2-6 is "1. B": it starts in the first sentence and ends in the second.
    write_part(tmp_path, {**FIXTURE, "D3": ("A 1. B 2.", ["2-6\t0-1"])})
    _, report = run(tmp_path)
    assert report.dropped[OUTSIDE] == 1
    assert report.examples[f"dropped: {OUTSIDE}"] == ["document D3, line 12"]


def test_test_split_is_built_when_present(tmp_path):
    write_part(tmp_path, FIXTURE)
    write_part(tmp_path, {"T9": ("PA 110. Poi.", ["3-6\t0-2\t110\tPA"])}, part="test")
    splits, report = run(tmp_path)
    assert splits["test"] == [{"text": "PA 110.", "relations": [["110", "PA"]]}, {"text": "Poi.", "relations": []}]
    assert report.missing == []


@pytest.mark.parametrize(
    "rel, message",
    [
        ("3-11\t0-200", "document D1: EVENT offsets 0-200 are outside the document"),
        ("3-11\t0-2\t120 mmHg\tFC", "document D1: EVENT text is 'FC' but offsets 0-2 hold 'PA'"),
        ("3-11\t2-0", "document D1: EVENT offsets is '2-0'"),
        ("2-11\t0-2", "document D1: RML offsets 2-11 hold ' 120 mmHg'; expected a mention without surrounding whitespace"),
        ("3-11", "document D1: expected 'D1 TAB REL"),
    ],
)
def test_bad_relation_names_document_and_line(tmp_path, rel, message):
    write_part(tmp_path, {"D1": (DOC, [rel])})
    with pytest.raises(SourceError) as err:
        run(tmp_path)
    assert err.value.path.endswith("training.txt") and err.value.where == 2
    assert message in err.value.message


def test_bad_token_file_names_document_and_line(tmp_path):
    write_part(tmp_path, FIXTURE)
    path = tmp_path / "training_tokenized" / "D1.tsv"
    lines = path.read_text("utf-8").splitlines()
    lines[1] = "1-2\t3-6\t121"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    with pytest.raises(SourceError, match=r"D1.tsv:2: document D1: token is '121' but offsets 3-6 hold '120'"):
        run(tmp_path)
    lines[1] = "1-2\t3-6"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    with pytest.raises(SourceError, match=r"D1.tsv:2: document D1: expected 3 TAB-separated fields"):
        run(tmp_path)


def test_bad_utf8_and_missing_files(tmp_path):
    write_part(tmp_path, FIXTURE)
    (tmp_path / "training_tokenized" / "D2.tsv").unlink()
    with pytest.raises(SourceError, match="document D2 of training.txt .line 9. has no tokenised file"):
        run(tmp_path)
    (tmp_path / "training.txt").write_bytes(b"D1|t|PA 120\nD1\tREL\t3-6\t0-2\n\nD2|t|caff\xe8\n")
    with pytest.raises(SourceError, match=r"training.txt:4: not valid UTF-8"):
        run(tmp_path)
    (tmp_path / "training.txt").unlink()
    with pytest.raises(MissingSource):
        run(tmp_path)


_word = st.text(alphabet=st.sampled_from(list("abcàé0129%/°.’")), min_size=1, max_size=5)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(_word, min_size=1, max_size=6), min_size=1, max_size=5), st.data())
def test_offsets_round_trip(tmp_path_factory, sentences, data):
    """Random tokens and in-sentence relations: sentences and mentions come back as exact slices."""
    text = " ".join(" ".join(s) for s in sentences)
    spans, pos = [], 0
    for s in sentences:
        spans.append([(pos + sum(len(w) + 1 for w in s[:j]), pos + sum(len(w) + 1 for w in s[:j]) + len(w)) for j, w in enumerate(s)])
        pos += sum(len(w) + 1 for w in s)
    rels, expected = [], []
    for toks in spans:
        pairs = data.draw(st.lists(st.tuples(st.sampled_from(toks), st.sampled_from(toks)), max_size=3))
        rels += [f"{a}-{b}\t{c}-{d}\t{text[a:b]}\t{text[c:d]}" for (a, b), (c, d) in pairs]
        expected.append([[text[a:b], text[c:d]] for (a, b), (c, d) in sorted(pairs)])
    folder = tmp_path_factory.mktemp("rel")
    (folder / "training_tokenized").mkdir()
    (folder / "training.txt").write_text(f"X|t|{text}\n" + "".join(f"X\tREL\t{r}\n" for r in rels), "utf-8")
    blocks = ["\n".join(f"{i}-{j}\t{a}-{b}\t{text[a:b]}" for j, (a, b) in enumerate(s, 1)) for i, s in enumerate(spans, 1)]
    (folder / "training_tokenized" / "X.tsv").write_text("\n\n".join(blocks) + "\n", "utf-8")
    report = ConversionReport()
    records = read_part(RawSource(folder), "training", report)
    assert [r["text"] for r in records] == [text[s[0][0]:s[-1][1]] for s in spans]
    assert [r["relations"] for r in records] == expected
    assert report.dropped == {}


def test_build_reports_missing_test_in_manifest(tmp_path):
    build(SAMPLES.parent, tmp_path / "out", tasks=["rel"], progress=False)
    entry = json.loads((tmp_path / "out" / "manifest.json").read_text("utf-8"))["tasks"]["rel"]
    assert {s: v["rows"] for s, v in entry["splits"].items()} == {"train": 180, "trial": 5}
    assert entry["report"]["missing"][0]["splits"] == ["test"]


@pytest.mark.skipif(not (FULL / "training.txt").is_file(), reason="full CLinkaRT training files not in raw/rel")
def test_full_data_counts():
    splits, report = run(FULL)
    assert {s: len(v) for s, v in splits.items()} == {"train": 1113, "trial": 5}
    assert sum(len(r["relations"]) for r in splits["train"]) == 658
    assert report.dropped == {}


def test_copy_of_samples_without_tokenised_folder_fails(tmp_path):
    shutil.copy(SAMPLES / "training.txt", tmp_path / "training.txt")
    with pytest.raises(SourceError, match="101184.tsv.*has no tokenised file"):
        run(tmp_path)

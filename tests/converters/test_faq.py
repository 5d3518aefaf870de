"""FAQ: 4-way multiple choice built from the QA4FAQ knowledge base (real sample files)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from evalita_data.converters import faq
from evalita_data.converters.common import option_key
from evalita_data.errors import SourceError
from evalita_data.building.pipeline import build
from evalita_data.building.rawsource import RawSource

from paths import SAMPLES
from constructed import by_split, letters_balanced, options_distinct, read_split, run_converter

FAQ_DIR = SAMPLES / "faq"


def read_raw(path: Path) -> str:
    """A file's text with its CRLF line ends kept."""
    with open(path, encoding="utf-8", newline="") as fh:
        return fh.read()


def answers_by_id(task_dir: Path) -> dict[str, str]:
    return {f.id: f.answer.replace("\r\n", "\n").strip() for _, f in faq.read_csv(RawSource(task_dir))}


def test_counts_and_exact_item(tmp_path: Path) -> None:
    out = tmp_path / "build"
    build(SAMPLES, out, ["faq"], progress=False)
    dev, test = read_split(out, "faq", "dev"), read_split(out, "faq", "test")
    assert (len(dev), len(test)) == (5, 25)
    assert [r["id"] for r in dev] == ["630", "647", "648", "708", "748"]
    item = dev[0]
    assert item["question"] == "In caso di subentro i moduli contrattuali restano gli stessi anche se le unita abitative sono diminuite?"
    assert item["correct_answer"] == "A"
    # The answer's embedded CRLF is written as LF.
    assert "080.231.3497,\noppure via PEC" in item["A"] and "\r" not in item["A"]
    answers = answers_by_id(FAQ_DIR)
    assert item["A"] == answers["630"]
    owner = {text: fid for fid, text in answers.items()}
    assert [owner[item[k]] for k in "BCD"] == ["667", "747", "710"]


def test_sixth_faq_with_its_crlf_question(tmp_path: Path) -> None:
    pairs, report = run_converter("faq", FAQ_DIR, 1234)
    rec = next(r for _, r in pairs if r["id"] == "609")
    assert rec["question"].startswith("È possibile cambiare la password di registrazione") and "\r" not in rec["question"]
    assert report.repaired["CRLF line break inside the text written as LF"] == 6
    assert report.notes["csv/xml agreement"] == "faqs_uft8_QA.xml holds the same 30 FAQs with identical fields"


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32))
def test_invariants_over_seeds(seed: int) -> None:
    pairs, _ = run_converter("faq", FAQ_DIR, seed)
    answers = answers_by_id(FAQ_DIR)
    keys_of = {}
    for fid, text in answers.items():
        keys_of.setdefault(option_key(text), set()).add(fid)
    splits = by_split(pairs)
    assert [r["id"] for r in splits["dev"]] == ["630", "647", "648", "708", "748"]  # the split never depends on the seed
    assert sorted(r["id"] for rs in splits.values() for r in rs) == sorted(answers)
    for split, recs in splits.items():
        assert letters_balanced(recs, "correct_answer", "ABCD"), split
        for rec in recs:
            assert rec[rec["correct_answer"]] == answers[rec["id"]]
            assert options_distinct(rec, "ABCD")
            for letter in "ABCD":
                if letter != rec["correct_answer"]:
                    # A distractor is another FAQ's answer, never one equal to this FAQ's answer.
                    assert rec["id"] not in keys_of[option_key(rec[letter])]


def test_shared_answers_are_never_each_others_distractor(raw_copy) -> None:
    root = raw_copy("faq")
    task_dir = root / "faq"
    (task_dir / faq.XML_NAME).unlink()  # the CSV alone is enough; the XML check is optional
    csv_text = read_raw(task_dir / faq.CSV_NAME)
    # FAQ 688 gets FAQ 687's answer with other spacing and case, like FAQs 191 and 195 of the full file.
    answers = answers_by_id(task_dir)
    twin = "  " + answers["687"].upper().replace(" ", "  ") + " "
    csv_text = csv_text.replace(answers["688"], twin)
    (task_dir / faq.CSV_NAME).write_text(csv_text, "utf-8", newline="")
    for seed in range(40):
        pairs, report = run_converter("faq", task_dir, seed)
        for _, rec in pairs:
            assert options_distinct(rec, "ABCD")
            if rec["id"] in ("687", "688"):
                others = {option_key(rec[k]) for k in "ABCD" if k != rec["correct_answer"]}
                assert option_key(answers["687"]) not in others
    assert report.notes["FAQs sharing one answer text (never each other's distractor)"] == [["687", "688"]]
    assert report.notes["csv/xml agreement"].endswith("absent: not cross-checked")


def test_deterministic_and_seed_changes_only_options(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    build(SAMPLES, a, ["faq"], progress=False)
    build(SAMPLES, b, ["faq"], progress=False)
    build(SAMPLES, c, ["faq"], seed=7, progress=False)
    for split in ("dev", "test"):
        assert (a / "faq" / f"{split}.jsonl").read_bytes() == (b / "faq" / f"{split}.jsonl").read_bytes()
        one, other = read_split(a, "faq", split), read_split(c, "faq", split)
        assert [(r["id"], r["question"], r[r["correct_answer"]]) for r in one] == \
               [(r["id"], r["question"], r[r["correct_answer"]]) for r in other]
        assert any(x != y for x, y in zip(one, other))


def test_csv_xml_disagreement_is_an_error(raw_copy) -> None:
    task_dir = raw_copy("faq") / "faq"
    xml = (task_dir / faq.XML_NAME).read_text("utf-8")
    (task_dir / faq.XML_NAME).write_text(xml.replace("Come cancellarsi dal sito?", "Come cancellarsi?"), "utf-8")
    with pytest.raises(SourceError, match=r"id=727\]: question differs from faqs_uft8_QA.csv"):
        run_converter("faq", task_dir, 1)


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t.replace("\r\n647;", "\r\n647;extra;"), r"5 fields; expected 4"),
    (lambda t: t.replace("id;question;answer;tag", "id;domanda;risposta;tag"), r":1: header is"),
    (lambda t: t.replace("\r\n647;", "\r\nx647;"), r"id is 'x647'; expected digits"),
    (lambda t: t.replace("\r\n648;", "\r\n647;"), r"duplicate id 647"),
])
def test_bad_csv(raw_copy, mutate, message) -> None:
    task_dir = raw_copy("faq") / "faq"
    (task_dir / faq.XML_NAME).unlink()
    text = read_raw(task_dir / faq.CSV_NAME)
    (task_dir / faq.CSV_NAME).write_text(mutate(text), "utf-8", newline="")
    with pytest.raises(SourceError, match=message):
        run_converter("faq", task_dir, 1)


def test_unclosed_quote_names_its_line(raw_copy) -> None:
    task_dir = raw_copy("faq") / "faq"
    (task_dir / faq.XML_NAME).unlink()
    text = read_raw(task_dir / faq.CSV_NAME)
    lines = text.split("\r\n")
    start = len(lines)  # the broken record starts on the line after the last one
    (task_dir / faq.CSV_NAME).write_text(text + '999;"never closed;answer;tag\r\n', "utf-8", newline="")
    with pytest.raises(SourceError) as err:
        run_converter("faq", task_dir, 1)
    assert f"{faq.CSV_NAME}:{start}:" in str(err.value) and "unexpected end of data" in str(err.value)

"""WiC, TE, SA, HS converters on the real samples: counts and exact records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evalita_data.building.pipeline import build
from evalita_data.converters.sa import unescape_test_text
from evalita_data.converters.hs import strip_export_space

from paths import TEST_DATA as DATA


def rows(out: Path, task: str, split: str) -> list[dict]:
    with open(out / task / f"{split}.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("b") / "build"
    build(DATA / "raw", out, ["wic", "te", "sa", "hs"], progress=False)
    return out


def test_split_counts(built: Path) -> None:
    manifest = json.loads((built / "manifest.json").read_text())
    counts = {t: {s: v["rows"] for s, v in e["splits"].items()} for t, e in manifest["tasks"].items()}
    assert counts == {
        "wic": {"train": 40, "dev": 30, "test": 30},
        "te": {"dev": 3, "test": 2},
        "sa": {"train": 50, "test": 50},
        "hs": {"dev": 40},
    }


def test_wic_records(built: Path) -> None:
    train = rows(built, "wic", "train")
    assert train[0] == {
        "id": "delicatezza.noun.10", "lemma": "delicatezza",
        "sentence1": "L' intransigenza consiste in questa delicatezza di stile , più che nelle parole sonanti e negli atteggiamenti di oratoria da \" Assemblea Nazionale \" .",
        "sentence2": "Non sono le dotte citazioni quelle che rafforzano la bontà di un ragionamento politico e giuridico , tuttavia , signor sottosegretario , nel ringraziarla della delicatezza dei modi della sua risposta , devo notare in premessa quanto segue .",
        "start1": 36, "end1": 47, "start2": 160, "end2": 171, "label": 1,
    }
    test = rows(built, "wic", "test")
    # Test labels come from the gold file; the unlabelled file gives the same records.
    assert test[0]["id"] == "vivere.verb.6" and test[0]["label"] == 0
    assert test[0]["sentence1"][test[0]["start1"]:test[0]["end1"]] == "vissuta"
    assert sum(r["label"] for r in test) == sum(
        json.loads(l)["label"] for l in open(DATA / "raw/wic/gold_truth/binary/test.jsonl", encoding="utf-8")  # noqa: E741
    )
    # The cross-lingual set is never read.
    manifest = json.loads((built / "manifest.json").read_text())
    assert not any("eng" in name for name in manifest["tasks"]["wic"]["inputs"])


def test_te_records(built: Path) -> None:
    dev = rows(built, "te", "dev")
    assert [r["entailment"] for r in dev] == ["SI", "NO", "SI"]  # YES, NO, SI
    assert dev[2] == {
        "id": "3", "entailment": "SI",
        "text1": "Dante Alighieri nacque a Firenze nel 1265 & morì a Ravenna nel 1321.",
        "text2": "Dante morì a Ravenna.",
    }


def test_sa_records(built: Path) -> None:
    train = rows(built, "sa", "train")
    assert train[0] == {
        "idtwitter": "286415930282631168", "subj": "0", "opos": "0", "oneg": "0", "iro": "0",
        "lpos": "0", "lneg": "0", "top": "0",
        "text": "iPasta, la app per cucinare anche Tablet e Smartphone: IPasta è un’applicazione per tablet che può essere utiliz... http://t.co/SHuqRcxD",
    }
    test = {r["idtwitter"]: r for r in rows(built, "sa", "test")}
    assert test["564796945563398145"]["top"] == "3"
    assert test["564796945563398145"]["text"] == "#BrigaAMICI che difendeva Gabriele,è l'amore.❤😍"
    # \\" in the test file becomes \" (as the train file holds it); \" alone becomes ".
    assert test["565241489119531008"]["text"] == 'Io a questa anteprima avrei preferito 10 minuti di Carlo Conti che dice \\"Scossa? VA BENE!\\" #sanremo2015https://t.co/tLF4hzYlax'


def test_sa_unescape_rule() -> None:
    assert unescape_test_text('a \\"b\\" c') == 'a "b" c'
    assert unescape_test_text('a \\\\"b\\\\"') == 'a \\"b\\"'
    assert unescape_test_text("no quotes \\ here") == "no quotes \\ here"


def test_hs_records(built: Path) -> None:
    dev = rows(built, "hs", "dev")
    assert dev[0] == {
        "id": "8723",
        "full_text": "@user @user In Svizzera gli immigrati hanno tutti un lavoro, uno stipendio giusto,una casa, una macchina. Dunque non si vedono in giro a vendere droga come da noi. Ma la Svizzera è un paese civile e ordinato. E poi ha confini facili da controllare.",
        "hs": 0, "stereotype": 1,
    }
    # The export's one trailing space is gone from every text, nothing else.
    assert not any(r["full_text"].endswith(" ") for r in dev)
    assert strip_export_space("a  ") == "a " and strip_export_space("a\u00a0") == "a\u00a0"
    manifest = json.loads((built / "manifest.json").read_text())
    missing = manifest["tasks"]["hs"]["report"]["missing"]
    assert missing[0]["splits"] == ["test_all", "test_tweets", "test_news"]
    assert "haspeede2_reference_taskAB-tweets.tsv" in missing[0]["files"]


def test_hs_test_splits_with_gold(raw_copy, tmp_path: Path) -> None:
    raw = raw_copy("hs")
    for f in (DATA / "fixtures/hs_gold").glob("*.tsv"):
        shutil.copy(f, raw / "hs" / f.name)
    out = tmp_path / "out"
    build(raw, out, ["hs"], progress=False)
    tweets, news, all_ = rows(out, "hs", "test_tweets"), rows(out, "hs", "test_news"), rows(out, "hs", "test_all")
    assert (len(tweets), len(news), len(all_)) == (40, 40, 80)
    assert all_ == tweets + news
    first = news[0]
    assert first["id"] == "10228" and first["hs"] == 10228 % 2 and first["stereotype"] == (10228 // 2) % 2
    # Test texts come from the public test file as they are (the test files have no export space).
    assert first["full_text"].startswith("Paolo Rumiz: \"I monaci")

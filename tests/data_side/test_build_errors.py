"""Bad input fails with file, line and what was expected, and leaves the old build intact."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_data.cli import main


def tree_digest(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }


def edit(path: Path, old: bytes, new: bytes, count: int = 1) -> None:
    data = path.read_bytes()
    assert old in data, f"fixture edit: {old!r} not in {path}"
    path.write_bytes(data.replace(old, new, count))


def replace_line(path: Path, lineno: int, new: bytes) -> None:
    lines = path.read_bytes().split(b"\n")
    lines[lineno - 1] = new
    path.write_bytes(b"\n".join(lines))


# Each case: task, file to break, how, and what the message must contain.
CASES = {
    "wic-bad-json": ("wic", "binary/train.jsonl", lambda p: replace_line(p, 3, b'{"id": "x",'), ["binary/train.jsonl:3", "not valid JSON"]),
    "wic-missing-field": ("wic", "binary/dev.jsonl", lambda p: edit(p, b'"lemma": "reale", ', b""), ["binary/dev.jsonl:1", "missing field 'lemma'"]),
    "wic-offset-outside": ("wic", "binary/dev.jsonl", lambda p: edit(p, b'"end1": 111', b'"end1": 999'), ["binary/dev.jsonl:1", "outside sentence1"]),
    "wic-unknown-label": ("wic", "binary/train.jsonl", lambda p: edit(p, b'"label": 1}', b'"label": 2}'), ["binary/train.jsonl:1", "label is 2"]),
    "wic-gold-mismatch": ("wic", "gold_truth/binary/test.jsonl", lambda p: edit(p, b'"start1": 44', b'"start1": 45'), ["gold_truth/binary/test.jsonl:1", "differs"]),
    "wic-latin1": ("wic", "binary/dev.jsonl", lambda p: edit(p, b'"lemma": "reale"', '"lemma": "realé"'.encode("latin-1")), ["binary/dev.jsonl:1", "not valid UTF-8"]),
    "te-malformed-xml": ("te", "EVALITA2009_RTE_dev.xml", lambda p: edit(p, b"</h>\n  </pair>", b"</h>\n  </pairs>"), ["EVALITA2009_RTE_dev.xml:6", "malformed XML (mismatched tag at column 4)"]),
    "te-unknown-label": ("te", "EVALITA2009_RTE_dev.xml", lambda p: edit(p, b'entailment="NO"', b'entailment="MAYBE"'), ["EVALITA2009_RTE_dev.xml [pair id=2]", "'MAYBE'", "expected one of"]),
    "te-duplicate-id": ("te", "EVALITA2009_RTE_dev.xml", lambda p: edit(p, b'id="2"', b'id="1"'), ["[pair id=1]", "duplicate pair id"]),
    "te-empty-text": ("te", "EVALITA2009_RTE_test.xml", lambda p: edit(p, b"<h>Il Po sfocia nel Tirreno.</h>", b"<h>  </h>"), ["[pair id=401]", "empty <h>"]),
    "te-entity-bomb": ("te", "EVALITA2009_RTE_test.xml", lambda p: edit(p, b'<entailment-corpus', b'<!DOCTYPE x [<!ENTITY a "aaaa">]>\n<entailment-corpus'), ["EVALITA2009_RTE_test.xml", "entity"]),
    "sa-missing-column": ("sa", "sentipolc16_officialdistrib_train.csv", lambda p: edit(p, b'"286415930282631168",0,0,0,0,0,0,0,', b'"286415930282631168",0,0,0,0,0,0,'), ["sentipolc16_officialdistrib_train.csv:2", "8 fields; expected 9"]),
    "sa-unknown-label": ("sa", "sentipolc16_officialdistrib_train.csv", lambda p: edit(p, b'"286415930282631168",0,0,', b'"286415930282631168",0,7,'), ["sentipolc16_officialdistrib_train.csv:2", "opos is '7'"]),
    "sa-bad-header": ("sa", "sentipolc16_officialdistrib_train.csv", lambda p: edit(p, b'"idtwitter"', b'"id"'), ["sentipolc16_officialdistrib_train.csv:1", "header"]),
    "sa-test-shape": ("sa", "sentipolc16_gold2000_text.csv", lambda p: edit(p, b'"564796945563398145","1"', b'"564796945563398145",1'), ["sentipolc16_gold2000_text.csv:1", "expected"]),
    "sa-test-label-disagrees": ("sa", "sentipolc16_gold2000.csv", lambda p: edit(p, b'"564796945563398145","1","1"', b'"564796945563398145","1","0"'), ["sentipolc16_gold2000_text.csv:1", "differ from"]),
    "sa-duplicate-id": ("sa", "sentipolc16_gold2000_text.csv", lambda p: edit(p, b'"564799228514693120"', b'"564796945563398145"'), ["sentipolc16_gold2000_text.csv:2", "duplicate id"]),
    "sa-empty-text": ("sa", "sentipolc16_officialdistrib_train.csv", lambda p: replace_line(p, 3, b'"286420272012197888",0,0,0,0,0,0,0,""'), ["sentipolc16_officialdistrib_train.csv:3", "empty text"]),
    "hs-missing-column": ("hs", "haspeede2_dev_taskAB.tsv", lambda p: edit(p, b"\t0\t1\r\n", b"\t0\r\n"), ["haspeede2_dev_taskAB.tsv:2", "expected 4 TAB-separated fields, found 3"]),
    "hs-unknown-label": ("hs", "haspeede2_dev_taskAB.tsv", lambda p: edit(p, b"\t0\t1\r\n", b"\tyes\t1\r\n"), ["haspeede2_dev_taskAB.tsv:2", "hs is 'yes'"]),
    "hs-duplicate-id": ("hs", "haspeede2_dev_taskAB.tsv", lambda p: edit(p, b"9199\t", b"8723\t"), ["haspeede2_dev_taskAB.tsv:3", "duplicate id 8723"]),
    "hs-empty-text": ("hs", "haspeede2_dev_taskAB.tsv", lambda p: edit(p, b"8723\t@user", b"8723\t \t0\t1\r\nX\t@user"), ["haspeede2_dev_taskAB.tsv:2", "empty text"]),
    "hs-cp1252": ("hs", "haspeede2_dev_taskAB.tsv", lambda p: edit(p, "è un paese".encode(), "è un paese".encode("cp1252")), ["haspeede2_dev_taskAB.tsv:2", "not valid UTF-8"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_fails_cleanly(case: str, raw_copy, tmp_path: Path) -> None:
    task, name, breaker, expected = CASES[case]
    raw = raw_copy(task)
    out = tmp_path / "build"
    runner = CliRunner()
    ok = runner.invoke(main, ["build", "--raw", str(raw), "--out", str(out), "--task", task])
    assert ok.exit_code == 0, ok.output
    before = tree_digest(out)

    breaker(raw / task / name)
    result = runner.invoke(main, ["build", "--raw", str(raw), "--out", str(out), "--task", task])
    assert result.exit_code == 1
    for fragment in expected:
        assert fragment in result.output, result.output
    assert "left as it was" in result.output
    assert tree_digest(out) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".build.tmp")] == []


def test_requested_missing_task_exits_1(tmp_path: Path) -> None:
    (tmp_path / "raw" / "te").mkdir(parents=True)
    result = CliRunner().invoke(main, ["build", "--raw", str(tmp_path / "raw"), "--out", str(tmp_path / "o"), "--task", "te"])
    assert result.exit_code == 1
    assert "te: NOT BUILT (missing)" in result.output and "raw/te/" in result.output

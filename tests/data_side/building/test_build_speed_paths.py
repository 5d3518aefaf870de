"""The fast paths of the build give the answers of the plain ones.

Compiled schema check vs jsonschema (same verdict on built records and on mutations of
them), tasks converted in worker processes (results and the first error in task order,
errors that do not pickle rebuilt), and the NER reader's whole-file path (a bad line
raises after the sentences before it).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from evalita_data.converters.ner import read_sentences
from evalita_data.errors import SourceError
from evalita_data.building.parallel import ordered_map
from evalita_data.building.pipeline import build
from evalita_data.building.rawsource import RawSource
from evalita_data.registry import get_task
from evalita_data.building.conversion_report import ConversionReport
from evalita_data.schema_check import fast_check, validator

from paths import TEST_DATA

RAW = TEST_DATA / "raw"
BUILT_TASKS = ["faq", "hs", "ner", "rel", "sa", "wic"]


def mutations(value: object):
    """Variants of a record that break one thing each: every field removed, retyped, emptied,
    every string with a line break (LF, CR, CRLF) at its start, inside and at its end."""
    if isinstance(value, str):
        for brk in ("\n", "\r", "\r\n"):
            yield from (brk + value, value[:1] + brk + value[1:], value + brk)
    if isinstance(value, dict):
        for key in value:
            rest = {k: v for k, v in value.items() if k != key}
            yield rest
            for bad in (None, 7, 1.5, True, "", " x", "x\n", "a\nb", [], {}, ["x"], [["a"]], [["a", "b", "c"]], [{"type": "PER"}]):
                yield {**value, key: bad}
            for sub in mutations(value[key]):
                yield {**value, key: sub}
        yield {**value, "extra": 1}
    elif isinstance(value, list):
        for i, item in enumerate(value):
            for sub in mutations(item):
                yield value[:i] + [sub] + value[i + 1:]
        if value:
            yield value + [copy.deepcopy(value[0])]
            yield value[:-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("build") / "out"
    build(RAW, out, BUILT_TASKS, progress=False)
    return out


@pytest.mark.parametrize("task", BUILT_TASKS)
def test_compiled_check_agrees_with_jsonschema(task, built):
    import json

    schema = get_task(task).schema
    fast, slow = fast_check(schema), validator(schema)
    assert fast is not None
    checked = rejected = 0
    for path in sorted((built / task).rglob("*.jsonl")):
        for line in path.read_text("utf-8").splitlines()[:20]:
            record = json.loads(line)
            for candidate in [record, *mutations(record)]:
                valid = not any(True for _ in slow.iter_errors(candidate))
                # The compiled check may be stricter (jsonschema then has the last word), never laxer.
                assert not fast(candidate) or valid, (task, candidate)
                if candidate is record:  # the hot path: a built record passes the compiled check
                    assert valid and fast(candidate)
                checked += 1
                rejected += not valid
    assert checked > 100 and rejected > 50


def square(x: int) -> int:
    if x == 3:
        raise SourceError("f.tsv", 3, "three is not allowed")
    if x == 5:
        raise ValueError("five")
    return x * x


def test_ordered_map_keeps_order_and_raises_the_first_error_in_order():
    assert list(ordered_map(square, [(i,) for i in (4, 2, 1, 0)], workers=2)) == [16, 4, 1, 0]
    got = []
    with pytest.raises(SourceError) as err:
        for r in ordered_map(square, [(1,), (2,), (3,), (5,)], workers=2):
            got.append(r)
    assert got == [1, 4]
    # SourceError's __init__ does not take its args: rebuilt with its fields.
    assert str(err.value) == "f.tsv:3: three is not allowed" and err.value.where == 3
    with pytest.raises(ValueError, match="five"):
        list(ordered_map(square, [(5,), (3,)], workers=2))
    # Costliest started first, results still in job order, the first error in job order.
    assert list(ordered_map(square, [(i,) for i in (4, 2, 1, 0)], workers=2, costs=[1, 9, 0, 5])) == [16, 4, 1, 0]
    got = []
    with pytest.raises(SourceError):
        for r in ordered_map(square, [(1,), (2,), (3,), (5,)], workers=2, costs=[0, 0, 0, 9]):
            got.append(r)
    assert got == [1, 4]


def test_parallel_and_sequential_builds_are_identical(tmp_path, built):
    out = tmp_path / "seq"
    build(RAW, out, BUILT_TASKS, progress=False, workers=1)
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(built) for p in built.rglob("*") if p.is_file())
    for rel in files:
        assert (out / rel).read_bytes() == (built / rel).read_bytes(), rel


def test_ner_bad_line_raises_after_the_sentences_before_it(tmp_path):
    (tmp_path / "X.tsv").write_text("Il\tO\nRe\tB-PER\n\n\nVa\tO\n\nA\tO\nRoma\tB-LUO\nora\tO\n", "utf-8")
    records = []
    with pytest.raises(SourceError) as err:
        for rec in read_sentences(RawSource(tmp_path), "X.tsv", ConversionReport()):
            records.append(rec)
    assert records == [{"text": "Il Re", "entities": [{"entity_text": "Re", "type": "PER"}]}, {"text": "Va", "entities": []}]
    assert err.value.where == 8 and "label is 'B-LUO'" in err.value.message


@pytest.mark.parametrize("pattern, rejected", [
    ("[\\n\\r]", ["a\rb", "\n", "ab\r\n"]),  # one character class: ^[^\n\r]*\Z
    ("\\r\\n|\\n", ["\n", "ab\r\n"]),  # anything else: ^(?![\s\S]*(?:P))
])
def test_not_pattern_compiles_to_the_same_verdict(pattern, rejected):
    """``not: {pattern: P}`` becomes a positive pattern for fastjsonschema (no exception per valid
    string): the verdicts of jsonschema, of fastjsonschema's own ``not`` and of the rewrite agree."""
    import fastjsonschema
    from jsonschema import Draft202012Validator

    from evalita_data.schema_check import draft2019

    schema = {"not": {"pattern": pattern}}
    rewritten = draft2019(schema)
    assert "not" not in rewritten  # the rewrite happened
    fast, plain, slow = fastjsonschema.compile(rewritten), fastjsonschema.compile(schema), Draft202012Validator(schema)
    strings = ["", "ab", "a b", "a\rb", "\n", "ab\r\n", "a\u2028b", "a\x85b"]
    for value in [*strings, 5, None, [], {}, ["a\n"]]:
        expected = value in strings and value not in rejected  # not-pattern rejects every non-string
        assert [_accepts(fast, value), _accepts(plain, value), slow.is_valid(value)] == [expected] * 3, value


def _accepts(check, value) -> bool:
    import fastjsonschema

    try:
        check(value)
    except fastjsonschema.JsonSchemaException:
        return False
    return True


def test_dumps_is_json_dumps_without_ascii_escapes():
    import json

    from evalita_data.jsonl import dumps

    for value in [{"text": "Èl \"x\"\n\t\u2028", "n": [1, 2.5, -0.0, 1e300, None, True, False, {"e": [], "d": {}}]}, {}, [], "s", 7, {"nan": float("nan")}]:
        assert dumps(value) == json.dumps(value, ensure_ascii=False)


def test_gc_paused_restores_the_collector_as_it_was():
    import gc

    from evalita_data.converters.common import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller that had paused it keeps it paused
    finally:
        gc.enable()


def test_ner_whole_file_repairs_and_entities_stop_at_sentence_ends(tmp_path):
    """An I- after a sentence break or after another type starts an entity (a repair, with its line);
    quotes and glue never cross a sentence break."""
    from evalita_data.converters.ner import REPAIR_I

    (tmp_path / "X.tsv").write_text(
        "\n".join(["Il\tO", "Re\tB-PER", "Sole\tI-PER", "\"\tO", "", "",
                   "Carlo\tI-PER", "a\tO", "Roma\tB-LOC", "Nord\tI-ORG", "(\tO", "", "\"\tO", "ok\tO", "\"\tO", ""]),
        "utf-8")
    report = ConversionReport()
    records = list(read_sentences(RawSource(tmp_path), "X.tsv", report))
    assert records == [
        {"text": "Il Re Sole \"", "entities": [{"entity_text": "Re Sole", "type": "PER"}]},
        {"text": "Carlo a Roma Nord (", "entities": [{"entity_text": "Carlo", "type": "PER"},
                                                     {"entity_text": "Roma", "type": "LOC"}, {"entity_text": "Nord", "type": "ORG"}]},
        {"text": "\"ok\"", "entities": []},
    ]
    assert report.repaired[REPAIR_I] == 2 and report.examples[f"repaired: {REPAIR_I}"] == ["X.tsv:7", "X.tsv:10"]

"""WiC-ITA JSON Lines (binary subtask, monolingual).

Keeps ``binary/{train,dev,test}.jsonl``; test labels come from
``gold_truth/binary/test.jsonl`` (same records, same order, plus ``label``). The
cross-lingual ``*_eng`` files are not read. Sentences are kept byte for byte,
including their pre-tokenisation and the C1 control characters of the source.
"""

from __future__ import annotations

import re
from typing import Iterator

from ..errors import MissingSource, SourceError
from ..building.rawsource import RawSource
from ..building.conversion_report import ConversionReport
from .common import iter_jsonl, require_fields

FIELDS = {"id": str, "lemma": str, "sentence1": str, "sentence2": str,
          "start1": int, "end1": int, "start2": int, "end2": int}
LABELLED = {**FIELDS, "label": int}
GOLD_TEST = "gold_truth/binary/test.jsonl"
_C1 = re.compile("[\u0080-\u009f]")


def _record(obj: dict, path: object, lineno: int, label: int) -> dict:
    if label not in (0, 1):
        raise SourceError(str(path), lineno, f"label is {label!r}; expected 0 or 1")
    for n in ("1", "2"):
        s, b, e = obj[f"sentence{n}"], obj[f"start{n}"], obj[f"end{n}"]
        if not 0 <= b < e <= len(s):
            raise SourceError(str(path), lineno, f"start{n}:end{n} = {b}:{e} is outside sentence{n} (length {len(s)})")
    return {k: obj[k] for k in FIELDS} | {"label": label}


def convert(source: RawSource, report: ConversionReport, seed: int) -> Iterator[tuple[str, dict]]:
    needed = ["binary/train.jsonl", "binary/dev.jsonl"]
    absent = [n for n in needed if not source.exists(n)]
    if absent:
        raise MissingSource(absent)
    c1 = 0
    for split in ("train", "dev"):
        name = f"binary/{split}.jsonl"
        for lineno, obj in iter_jsonl(source, name):
            require_fields(obj, LABELLED, source.root / name, lineno)
            rec = _record(obj, source.root / name, lineno, obj["label"])
            c1 += bool(_C1.search(rec["sentence1"] + rec["sentence2"]))
            yield split, rec
    if not (source.exists("binary/test.jsonl") and source.exists(GOLD_TEST)):
        report.missing_part(["binary/test.jsonl", GOLD_TEST], ["test"],
                            "Both come with https://github.com/wic-ita/data.")
    else:
        texts = list(iter_jsonl(source, "binary/test.jsonl"))
        gold = list(iter_jsonl(source, GOLD_TEST))
        if len(texts) != len(gold):
            raise SourceError(source.root / GOLD_TEST, None,
                              f"{len(gold)} records, but binary/test.jsonl has {len(texts)}; expected the same records")
        for (lineno, obj), (glineno, gobj) in zip(texts, gold):
            require_fields(obj, FIELDS, source.root / "binary/test.jsonl", lineno)
            require_fields(gobj, LABELLED, source.root / GOLD_TEST, glineno)
            if any(obj[k] != gobj[k] for k in FIELDS):
                raise SourceError(source.root / GOLD_TEST, glineno, f"record {gobj['id']!r} differs from line {lineno} "
                                                                    "of binary/test.jsonl; expected the same record "
                                                                    "plus its label")
            rec = _record(obj, source.root / GOLD_TEST, glineno, gobj["label"])
            c1 += bool(_C1.search(rec["sentence1"] + rec["sentence2"]))
            yield "test", rec
    report.note("records with C1 control characters (kept as in the source)", c1)

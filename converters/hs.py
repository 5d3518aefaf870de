"""HaSpeeDe 2 TSV files (task A labels, plus the stereotype labels).

Read with quoting off: quotes are part of the texts. Line ends may be CRLF or LF
and the last line may lack one. Documented normalisation: the distribution's
export appended exactly one space to every text of the dev file (and to the
header's ``text``); that one trailing space is removed. No other character is
touched (HTML entities, ``@user``, ``URL``, emoji are kept).

Test splits need the gold reference files (4 columns ``id, text, hs, stereotype``
with a header, as read by the official scorer): ``test_tweets``, ``test_news``
and ``test_all`` = tweets then news. Texts come from the public test files.
"""

from __future__ import annotations

from typing import Iterator

from ..errors import MissingSource, SourceError
from ..building.rawsource import RawSource
from ..building.conversion_report import ConversionReport
from .common import iter_tsv, parse_label, require_text

DEV = "haspeede2_dev_taskAB.tsv"
TEST = {"tweets": "haspeede2_test_taskAB-tweets.tsv", "news": "haspeede2-test_taskAB-news.tsv"}
GOLD = {"tweets": "haspeede2_reference_taskAB-tweets.tsv", "news": "haspeede2_reference_taskAB-news.tsv"}
HEADER = ["id", "text", "hs", "stereotype"]
BIT = {"0": 0, "1": 1}


def strip_export_space(text: str) -> str:
    return text[:-1] if text.endswith(" ") else text


def _check_id(value: str, path: object, lineno: int) -> str:
    if not value.isdigit():
        raise SourceError(str(path), lineno, f"id is {value!r}; expected digits")
    return value


def _labelled(source: RawSource, name: str, strip_space: bool) -> Iterator[tuple[int, dict]]:
    path = source.root / name
    rows = iter_tsv(source, name, 4)
    first = next(rows, None)
    if first is None:
        raise SourceError(path, None, "empty file; expected a header and labelled rows")
    header = [h.strip() for h in first[1]]
    if header != HEADER:
        raise SourceError(path, 1, f"header is {first[1]}; expected {HEADER}")
    seen: set[str] = set()
    for lineno, (rid, text, hs, stereo) in rows:
        rid = _check_id(rid, path, lineno)
        if rid in seen:
            raise SourceError(path, lineno, f"duplicate id {rid}")
        seen.add(rid)
        text = strip_export_space(text) if strip_space else text
        yield lineno, {
            "id": rid,
            "full_text": require_text(text, path, lineno, "text"),
            "hs": parse_label(hs, BIT, path, lineno, "hs"),
            "stereotype": parse_label(stereo, BIT, path, lineno, "stereotype"),
        }


def _test_split(source: RawSource, part: str) -> list[dict]:
    path = source.root / TEST[part]
    gold = {rec["id"]: (lineno, rec) for lineno, rec in _labelled(source, GOLD[part], strip_space=False)}
    out = []
    for lineno, (rid, text) in iter_tsv(source, TEST[part], 2):
        rid = _check_id(rid, path, lineno)
        if rid not in gold:
            raise SourceError(path, lineno, f"id {rid} has no label in {GOLD[part]}")
        _gl, grec = gold.pop(rid)
        out.append({"id": rid, "full_text": require_text(text, path, lineno, "text"), "hs": grec["hs"],
                    "stereotype": grec["stereotype"]})
    if gold:
        lineno, rec = min(gold.values(), key=lambda v: v[0])
        raise SourceError(source.root / GOLD[part], lineno,
                          f"id {rec['id']} is not in {TEST[part]} ({len(gold)} such ids)")
    return out


def convert(source: RawSource, report: ConversionReport, seed: int) -> Iterator[tuple[str, dict]]:
    if not source.exists(DEV):
        raise MissingSource([DEV], "It comes with haspeede2_dev.zip of https://github.com/msang/haspeede (2020/).")
    for _lineno, rec in _labelled(source, DEV, strip_space=True):
        yield "dev", rec
    needed = list(TEST.values()) + list(GOLD.values())
    absent = [n for n in needed if not source.exists(n)]
    if absent:
        report.missing_part(absent, ["test_all", "test_tweets", "test_news"])
        return
    parts = {part: _test_split(source, part) for part in ("tweets", "news")}
    for part in ("tweets", "news"):
        for rec in parts[part]:
            yield f"test_{part}", rec
    for part in ("tweets", "news"):
        for rec in parts[part]:
            yield "test_all", rec

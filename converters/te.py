"""Evalita 2009 textual entailment, RTE-style XML.

Each file holds ``<pair id=".." entailment="YES|NO|SI"><t>..</t><h>..</h></pair>``
elements (under any root). ``YES`` and ``SI`` become "SI", ``NO`` stays "NO";
any other value is an error. The split is read from the file name: one file
containing ``dev`` and one containing ``test``. Leading and trailing whitespace
of ``<t>`` and ``<h>`` (XML indentation) is removed; the text inside is kept.
"""

from __future__ import annotations

from typing import Iterator

from ..errors import MissingSource, SourceError
from ..building.rawsource import RawSource
from ..building.conversion_report import ConversionReport
from .common import parse_label, parse_xml

LABELS = {"YES": "SI", "SI": "SI", "NO": "NO"}


def split_files(source: RawSource) -> dict[str, str]:
    files = {}
    for name in source.glob("*.xml"):
        base = name.lower()
        for split in ("dev", "test"):
            if split in base:
                if split in files:
                    raise SourceError(source.root / name, None,
                                      f"a second {split} file beside {files[split]}; expected one XML file per split")
                files[split] = name
    return files


def convert(source: RawSource, report: ConversionReport, seed: int) -> Iterator[tuple[str, dict]]:
    files = split_files(source)
    if not files:
        raise MissingSource(["<dev>.xml", "<test>.xml"])
    for split in ("dev", "test"):
        if split not in files:
            report.missing_part([f"<{split}>.xml"], [split])
            continue
        name = files[split]
        path = source.root / name
        seen: set[str] = set()
        pairs = parse_xml(source, name).iter("pair")
        for n, pair in enumerate(pairs, 1):
            pid = pair.get("id")
            where = f"pair {n}" if pid is None else f"pair id={pid}"
            if not pid:
                raise SourceError(path, where, "pair without an id attribute")
            if pid in seen:
                raise SourceError(path, where, "duplicate pair id")
            seen.add(pid)
            label = parse_label((pair.get("entailment") or "").strip().upper(), LABELS, path, where, "entailment")
            texts = {}
            for tag in ("t", "h"):
                elems = pair.findall(tag)
                if len(elems) != 1:
                    raise SourceError(path, where, f"{len(elems)} <{tag}> elements; expected exactly one")
                text = "".join(elems[0].itertext()).strip()
                if not text:
                    raise SourceError(path, where, f"empty <{tag}>; expected text")
                texts[tag] = text
            yield split, {"id": pid, "entailment": label, "text1": texts["t"], "text2": texts["h"]}
        if not seen:
            raise SourceError(path, None,
                              "no <pair> elements; expected <pair id=.. entailment=..><t>..</t><h>..</h></pair>")

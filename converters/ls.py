"""Evalita 2009 lexical substitution: SemEval-2007 style XML joined with a gold file.

XML: ``<lexelt item="lemma.pos"><instance id=".."><context>.. <head>word</head> ..</context>``
(under any root). Each context holds exactly one ``<head>``, which is kept in the
record's ``context`` as literal ``<head>..</head>`` markup; surrounding whitespace
of the context (XML indentation) is removed, the text inside is kept.

Gold: one line per instance, ``lemma.pos id :: sub count;sub count;...`` (a final
``;`` is allowed; a substitute may contain spaces, its count is the last token). A
line with nothing after ``::`` is an instance without gold. XML and gold are joined
on (lexelt, instance id); an instance without gold substitutes and a gold line
without an instance are dropped and reported, never invented. A substitute listed
twice on one line has its counts summed (reported as a repair). ``answers`` are
sorted by count (descending), then by word.
"""

from __future__ import annotations

import re
from typing import Iterator

from ..errors import MissingSource, SourceError
from ..building.rawsource import RawSource
from ..building.conversion_report import ConversionReport
from .common import iter_lines, parse_xml

SPLITS = {"dev": ("trial/lexsub_trial.xml", "trial/gold.trial"), "test": ("test/lexsub_test.xml", "test/gold.test")}
_GOLD_LINE = re.compile(r"^(\S+)\s+(\S+)\s+::(.*)$")
_SUBSTITUTE = re.compile(r"^(.*?\S)\s+(\S+)$")

Key = tuple[str, str]


def read_instances(source: RawSource, name: str) -> dict[Key, dict]:
    """(lexelt, id) -> record without answers, in document order."""
    path = source.root / name
    out: dict[Key, dict] = {}
    ids: dict[str, str] = {}
    for lexelt in parse_xml(source, name).iter("lexelt"):
        item = lexelt.get("item") or ""
        if not re.fullmatch(r"\S+\.\S+", item):
            raise SourceError(path, f"lexelt item={item!r}", "expected an item attribute 'lemma.pos'")
        for n, inst in enumerate(lexelt.findall("instance"), 1):
            iid = (inst.get("id") or "").strip()
            where = f"lexelt {item}, instance " + (f"id={iid}" if iid else str(n))
            if not iid:
                raise SourceError(path, where, "instance without an id attribute")
            if iid in ids:
                raise SourceError(path, where,
                                  f"instance id {iid} also under lexelt {ids[iid]}; expected unique instance ids")
            ids[iid] = item
            contexts = inst.findall("context")
            if len(contexts) != 1:
                raise SourceError(path, where, f"{len(contexts)} <context> elements; expected exactly one")
            ctx = contexts[0]
            heads = list(ctx)
            if len(heads) != 1 or heads[0].tag != "head" or len(heads[0]):
                raise SourceError(path, where, f"<context> holds {[h.tag for h in heads]}; expected exactly one <head> "
                                               "with text only")
            head = heads[0].text or ""
            if not head.strip():
                raise SourceError(path, where, "empty <head>; expected the target word")
            context = f"{ctx.text or ''}<head>{head}</head>{heads[0].tail or ''}".strip()
            out[(item, iid)] = {"id": iid, "context": context, "head": head, "lexelt": item,
                                "lexelt_lemma": item.rsplit(".", 1)[0]}
    if not out:
        raise SourceError(path, None, "no <lexelt><instance> elements; expected SemEval-2007 lexical substitution XML")
    return out


def parse_substitutes(text: str, path: object, lineno: int, report: ConversionReport, name: str = "") -> list[dict]:
    """``sub count;sub count;...`` -> answers sorted by count (descending), then word."""
    counts: dict[str, int] = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        m = _SUBSTITUTE.match(part)
        if not m:
            raise SourceError(str(path), lineno, f"substitute {part!r} has no count; expected 'word count'")
        word, count = m.groups()
        if not count.isdigit() or int(count) < 1:
            raise SourceError(str(path), lineno,
                              f"substitute {word!r} has count {count!r}; expected a positive integer")
        if word in counts:
            report.repair("substitute listed twice on one gold line: counts summed", f"{name or path}:{lineno} {word}")
        counts[word] = counts.get(word, 0) + int(count)
    return [{"word": w, "count": c} for w, c in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))]


def read_gold(source: RawSource, name: str, report: ConversionReport) -> dict[Key, tuple[int, list[dict]]]:
    """(lexelt, id) -> (line number, answers); answers are empty for a line with nothing after ``::``."""
    path = source.root / name
    gold: dict[Key, tuple[int, list[dict]]] = {}
    for lineno, line in iter_lines(source, name):
        if not line.strip():
            continue
        m = _GOLD_LINE.match(line.strip())
        if not m:
            raise SourceError(path, lineno, "expected 'lemma.pos id :: substitute count;substitute count;...'")
        key = (m.group(1), m.group(2))
        if key in gold:
            raise SourceError(path, lineno, f"second gold line for {key[0]} {key[1]} (first on line {gold[key][0]})")
        gold[key] = (lineno, parse_substitutes(m.group(3), path, lineno, report, name))
    return gold


def convert(source: RawSource, report: ConversionReport, seed: int) -> Iterator[tuple[str, dict]]:
    if not any(source.exists(xml) for xml, _ in SPLITS.values()):
        raise MissingSource([f for pair in SPLITS.values() for f in pair])
    for split, (xml, gold_name) in SPLITS.items():
        if not (source.exists(xml) and source.exists(gold_name)):
            report.missing_part([xml, gold_name], [split])
            continue
        instances = read_instances(source, xml)
        gold = read_gold(source, gold_name, report)
        for key, rec in instances.items():
            lineno, answers = gold.get(key, (None, []))
            if lineno is None:
                report.drop("instance without a gold line", f"{xml} lexelt={key[0]} id={key[1]}")
            elif not answers:
                report.drop("instance whose gold line lists no substitute", f"{gold_name}:{lineno} ({key[0]} {key[1]})")
            else:
                yield split, {**rec, "answers": answers}
        for key, (lineno, _) in gold.items():
            if key not in instances:
                report.drop("gold line without an instance in the XML", f"{gold_name}:{lineno} ({key[0]} {key[1]})")
        report.note(f"{split}: instances in {xml}", len(instances))
        report.note(f"{split}: gold lines in {gold_name}", len(gold))

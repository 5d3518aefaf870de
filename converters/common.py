"""Helpers shared by several converters: line readers, safe XML, field checks."""

from __future__ import annotations

import csv
import gc
import json
import random
import re
from contextlib import contextmanager
from typing import Iterator, Sequence, TypeVar
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as _safe_fromstring

from ..errors import SourceError
from ..jsonl import DuplicateKey, loads_strict
from ..building.rawsource import RawSource
from ..building.conversion_report import ConversionReport

T = TypeVar("T")


def read_lines(source: RawSource, name: str) -> list[str]:
    """Every line of a UTF-8 file without its LF or CRLF; line ``n`` is item ``n - 1``.

    Splits on LF only: texts may hold other Unicode line separators, which
    ``str.splitlines`` would wrongly treat as line ends. A missing final line
    terminator is accepted (several originals end without one).
    """
    text = source.read_text(name)
    if text.startswith("\ufeff"):
        raise SourceError(source.root / name, 1, "starts with a byte-order mark; expected plain UTF-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if "\r" in text:
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    return lines


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside (as it was after): for whole-file parsing.

    Objects allocated while a file's columns (lists of 100k+ items) are young make the
    collector walk those lists again and again (about 10 % of a NER build); code that
    creates no reference cycles gives the collector nothing to find there.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def iter_lines(source: RawSource, name: str) -> Iterator[tuple[int, str]]:
    """(line number, line) for every line of a UTF-8 file, as :func:`read_lines` splits them."""
    yield from enumerate(read_lines(source, name), 1)


def iter_jsonl(source: RawSource, name: str) -> Iterator[tuple[int, dict]]:
    """(line number, object) for every line of a JSON Lines file."""
    for lineno, line in iter_lines(source, name):
        if not line.strip():
            raise SourceError(source.root / name, lineno, "empty line; expected one JSON object per line")
        try:
            obj = loads_strict(line)
        except DuplicateKey as err:
            raise SourceError(source.root / name, lineno, f"{err}; expected each key once") from None
        except json.JSONDecodeError as err:
            raise SourceError(source.root / name, lineno, f"not valid JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(obj, dict):
            raise SourceError(source.root / name, lineno, f"expected a JSON object, got {type(obj).__name__}")
        yield lineno, obj


def iter_tsv(source: RawSource, name: str, ncols: int) -> Iterator[tuple[int, list[str]]]:
    """Rows of a TAB-separated file read with quoting off (quotes are text)."""
    for lineno, line in iter_lines(source, name):
        fields = line.split("\t")
        if len(fields) != ncols:
            raise SourceError(
                source.root / name, lineno, f"expected {ncols} TAB-separated fields, found {len(fields)}"
            )
        yield lineno, fields


def iter_csv(source: RawSource, name: str, delimiter: str = ",") -> Iterator[tuple[int, list[str]]]:
    """(line where the record starts, fields) for every record of an RFC 4180 CSV file.

    Quoted fields may span lines; a malformed record (e.g. an unclosed quote) is a
    :class:`SourceError` naming the line. Streams: the file is never held whole.
    """
    path = source.root / name
    with source.open_text(name) as fh:
        reader = csv.reader(fh, delimiter=delimiter, strict=True)
        start = 1
        try:
            for row in reader:
                yield start, row
                start = reader.line_num + 1
        except csv.Error as err:
            raise SourceError(path, start, f"malformed CSV record ({err}); expected {delimiter!r}-separated fields, "
                              'quoted with "" escaping') from None


_TYPE_NAMES = {str: "a string", int: "an integer"}


def require_fields(obj: dict, spec: dict[str, type], path: object, where: int | str, exact: bool = True) -> None:
    """Check that ``obj`` has each field of ``spec`` with its type (and, if exact, no other)."""
    for key, typ in spec.items():
        if key not in obj:
            raise SourceError(str(path), where, f"missing field {key!r}; expected fields {list(spec)}")
        value = obj[key]
        # bool is an int subclass in Python but never a valid label or offset here.
        if not isinstance(value, typ) or isinstance(value, bool):
            raise SourceError(str(path), where,
                              f"field {key!r} is {value!r}; expected {_TYPE_NAMES.get(typ, typ.__name__)}")
    if exact:
        extra = [k for k in obj if k not in spec]
        if extra:
            raise SourceError(str(path), where, f"unexpected field(s) {extra}; expected fields {list(spec)}")


def require_text(value: str, path: object, where: int | str, what: str) -> str:
    if not value.strip():
        raise SourceError(str(path), where, f"empty {what}; expected non-empty text")
    return value


def parse_label(value: str, allowed: dict[str, object], path: object, where: int | str, what: str) -> object:
    """Map a raw label through ``allowed``; anything else is an error naming the values expected."""
    try:
        return allowed[value]
    except KeyError:
        raise SourceError(str(path), where, f"{what} is {value!r}; expected one of {sorted(allowed)}") from None


def parse_xml(source: RawSource, name: str) -> Element:
    """Parse an XML file with entity expansion, DTD fetches and network access refused."""
    path = source.path(name)
    data = path.read_bytes()
    try:
        return _safe_fromstring(data, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except ParseError as err:
        line, col = err.position
        reason = str(err).split(": line")[0]  # the position is given separately
        raise SourceError(path, line, f"malformed XML ({reason} at column {col}); expected well-formed XML") from None
    except DefusedXmlException as err:
        raise SourceError(path, None, f"refused XML construct: {err}; entity declarations and external references are "
                                      "not allowed") from None


def iter_blocks(source: RawSource, name: str) -> Iterator[list[tuple[int, str]]]:
    """Runs of non-empty lines, each as [(line number, line)], split at empty lines.

    For the block formats (one token per line, PubTator documents): any number of
    empty lines separates blocks, and the file may or may not end with one.
    """
    block: list[tuple[int, str]] = []
    for lineno, line in iter_lines(source, name):
        if line:
            block.append((lineno, line))
        elif block:
            yield block
            block = []
    if block:
        yield block


def seeded_sample(n: int, k: int, seed: int, salt: str) -> list[int]:
    """``k`` distinct indices of ``range(n)``, ascending, drawn by ``random.Random(f"{seed}:{salt}")``.

    The salt (e.g. ``"ner/adg/trial"``) keeps each draw independent of the others,
    so adding a draw elsewhere never changes this one. A string seed is hashed
    with SHA-512 by ``random``, so the draw is the same in every process.
    """
    if k > n:
        raise ValueError(f"cannot draw {k} items from {n}")
    return sorted(seeded_rng(seed, salt).sample(range(n), k))


_SPAN = re.compile(r"(\d+)-(\d+)", re.ASCII)


def parse_span(value: str, path: object, where: int | str, what: str) -> tuple[int, int]:
    """``"<start>-<end>"`` as two ints with ``0 <= start < end``."""
    match = _SPAN.fullmatch(value)
    if not match or int(match[1]) >= int(match[2]):
        raise SourceError(str(path), where, f"{what} is {value!r}; expected <start>-<end> with start < end")
    return int(match[1]), int(match[2])


def clean_text(text: str, report: ConversionReport, where: str) -> str:
    """CRLF inside a text -> LF, surrounding whitespace removed; each change counted as a repair."""
    cleaned = text.replace("\r\n", "\n").strip()
    if "\r\n" in text:
        report.repair("CRLF line break inside the text written as LF", where)
    if text.replace("\r\n", "\n") != cleaned:
        report.repair("surrounding whitespace removed", where)
    return cleaned


def option_key(text: str) -> str:
    """How two answer options are compared: whitespace runs collapsed, case folded."""
    return " ".join(text.split()).casefold()


def seeded_rng(*parts: object) -> random.Random:
    """A private generator for one named random choice.

    Seeding with a string is stable across runs and platforms (Python hashes it
    with SHA-512), so e.g. ``seeded_rng("faq-options", seed, faq_id)`` gives each
    item its own stream: adding an item never changes the draws of another.
    """
    return random.Random(":".join(str(p) for p in parts))


def balanced_positions(n: int, k: int, rng: random.Random) -> list[int]:
    """``n`` answer positions in ``range(k)``, each used ``n // k`` or ``n // k + 1`` times, seeded order.

    Used for the position of the correct option, so that no letter is favoured.
    """
    positions = [i % k for i in range(n)]
    rng.shuffle(positions)
    return positions


def place_at(items: Sequence[T], position: int, item: T) -> list[T]:
    """``items`` with ``item`` inserted at ``position``."""
    out = list(items)
    out.insert(position, item)
    return out


def seeded_split(keys: Sequence[T], sizes: dict[str, int], rng: random.Random) -> dict[T, str]:
    """Assign ``sizes[split]`` keys to each split (in the order given) by a seeded shuffle.

    Keys left over are not in the result: the caller reports them.
    """
    if sum(sizes.values()) > len(keys):
        raise ValueError(f"split sizes {sizes} exceed the {len(keys)} items")
    order = list(keys)
    rng.shuffle(order)
    assignment: dict[T, str] = {}
    start = 0
    for split, size in sizes.items():
        for key in order[start:start + size]:
            assignment[key] = split
        start += size
    return assignment

"""Italian medical specialty admission tests (SSM) from Excel workbooks.

Workbooks ``raw/at/*.xlsx`` are opened read-only with cached cell values only: no
formula is evaluated, no macro is loaded. Every non-empty sheet is one exam year:
the year (19xx/20xx) is read from the sheet name, else from the file name; so both
one workbook per year and one sheet per year work. The first row is the header,
detected by name (Italian or English, case-insensitive, see ``ROLES`` and
raw/at/README.md); the correct answer is always the first option. Anything else
stops the build with the file, sheet and cell.

Exclusions, each reported with its reason: a question that needs an image (a
non-empty image column, or a question text that refers to an image/figure) and a
question with two equal options. Construction (docs/converters-constructed.md):
- split: ``dev`` = min(21, N // 2) questions, ``test`` = min(500, N - dev) of the
  others, both drawn with the fixed ``SPLIT_SEED`` (never ``--seed``); questions
  beyond the test cap are reported. Source order within each split.
- options: the correct answer goes to a letter balanced over A-E within each split;
  the four wrong answers fill the other letters in a per-question seeded order.
Options and letters depend on the task seed only.
"""

from __future__ import annotations

import datetime as dt
import re
import zipfile
from collections import Counter
from typing import Iterator, NamedTuple

from openpyxl import load_workbook
from openpyxl.utils import get_column_letter
from openpyxl.utils.exceptions import InvalidFileException

from ..errors import MissingSource, SourceError
from ..building.rawsource import RawSource
from ..building.conversion_report import ConversionReport
from .common import balanced_positions, clean_text, option_key, place_at, seeded_rng, seeded_split

LETTERS = ["A", "B", "C", "D", "E"]
DEV_SIZE = 21
TEST_CAP = 500
SPLIT_SEED = 2023

# Header name (normalised: case-folded, single spaces, no final '.' or ':') -> column role.
# Options: ("option", 0) is the correct answer, 1-4 the wrong ones.
ROLES: dict[str, tuple] = {}
for _name in ("domanda", "quesito", "testo", "question", "question text"):
    ROLES[_name] = ("question",)
for _name in ("n", "n°", "nr", "num", "numero", "id", "no", "number"):
    ROLES[_name] = ("number",)
for _name in ("immagine", "figura", "image", "figure"):
    ROLES[_name] = ("image",)
for _name in ("materia", "argomento", "note", "subject", "topic", "notes"):
    ROLES[_name] = ("ignored",)
for _i in range(1, 6):
    for _stem in ("risposta", "opzione", "answer", "option"):
        ROLES[f"{_stem} {_i}"] = ("option", _i - 1)
for _name in ("risposta corretta", "risposta esatta", "correct answer"):
    ROLES[_name] = ("option", 0)
for _i in range(1, 5):
    for _stem in ("risposta errata", "risposta sbagliata", "distrattore", "wrong answer", "distractor"):
        ROLES[f"{_stem} {_i}"] = ("option", _i)
NO_IMAGE = {"", "no", "n", "0", "false", "falso", "none"}
_YEAR = re.compile(r"(?<!\d)(19\d\d|20\d\d)(?!\d)")
_IMAGE_TEXT = re.compile(
    r"\bimmagin[ei]\b|\bfotografi[ae]\b|\b(?:in|nella|della|dalla|alla|seguente|la) figura\b(?! professional)"
    r"|\bfigura (?:seguente|riportata|sottostante|sopra|sotto|allegata|a lato|\d)|\bimages?\b|\bfigure \d",
    re.IGNORECASE,
)


class Question(NamedTuple):
    id: str
    where: str
    question: str
    options: list[str]  # correct first
    excluded: str = ""  # why the question is left out; options are then empty


def normalise_header(value: object) -> str:
    return " ".join(str(value).split()).casefold().rstrip(".:").strip() if value is not None else ""


def cell_text(value: object, path: object, where: str) -> str:
    """A cell's cached value as text; numbers are written without a spurious '.0'."""
    if value is None:
        return ""
    if isinstance(value, bool) or isinstance(value, (dt.datetime, dt.date, dt.time)):
        raise SourceError(str(path), where, f"cell holds {value!r} ({type(value).__name__}); expected text or a number")
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def sheet_year(file_name: str, sheet: str, path: object) -> str:
    """The exam year: from the sheet name if it has one, else from the file name."""
    in_sheet = sorted(set(_YEAR.findall(sheet)))
    in_file = sorted(set(_YEAR.findall(file_name.rsplit("/", 1)[-1])))
    where = f"sheet {sheet!r}"
    if len(in_sheet) > 1:
        raise SourceError(str(path), where, f"several years {in_sheet} in the sheet name; expected one exam year")
    if in_sheet:
        if len(in_file) == 1 and in_file != in_sheet:
            raise SourceError(str(path), where,
                              f"sheet name says {in_sheet[0]} but file name says {in_file[0]}; expected one exam year")
        return in_sheet[0]
    if len(in_file) == 1:
        return in_file[0]
    raise SourceError(str(path), where, "no single exam year (19xx/20xx) in the sheet name or the file name; "
                      "name the sheet (one sheet per year) or the file (one workbook per year) with the year")


def header_roles(header: tuple, path: object, sheet: str) -> dict[int, tuple]:
    """Column index -> role; fails unless there is a question column and five option columns."""
    roles: dict[int, tuple] = {}
    taken: dict[tuple, str] = {}
    for col, value in enumerate(header):
        name = normalise_header(value)
        if not name:
            continue
        role = ROLES.get(name)
        where = f"sheet {sheet!r}, cell {get_column_letter(col + 1)}1"
        if role is None:
            raise SourceError(str(path), where, f"unknown column {value!r}; expected the header of raw/at/README.md "
                              "(Domanda/Question, Risposta 1-5/Answer 1-5 or Risposta corretta + Risposta errata 1-4, "
                              "optional N/Immagine)")
        if role in taken and role != ("ignored",):
            raise SourceError(str(path), where, f"column {value!r} has the same role as column {taken[role]!r}")
        taken[role] = str(value)
        roles[col] = role
    needed = [("question",)] + [("option", k) for k in range(5)]
    absent = [r for r in needed if r not in taken]
    if absent:
        names = ["Domanda/Question"
                 if r == ("question",) else f"option {r[1] + 1} ({'correct' if r[1] == 0 else 'wrong'})"
                 for r in absent]
        raise SourceError(str(path), f"sheet {sheet!r}, row 1",
                          f"missing column(s): {', '.join(names)}; header is {[v for v in header if v is not None]}")
    return roles


def image_reason(row: dict, question: str) -> str | None:
    flag = row.get(("image",), "")
    if normalise_header(flag) not in NO_IMAGE:
        return f"needs an image (image column: {flag!r})"
    m = _IMAGE_TEXT.search(question)
    return f"question refers to an image ({m.group(0)!r})" if m else None


def read_sheet(ws, path: object, file_name: str, year: str, report: ConversionReport) -> Iterator[Question]:
    rows = ws.iter_rows(values_only=True)
    roles = header_roles(next(rows), path, ws.title)
    seen: dict[str, int] = {}
    ordinal = 0
    for rownum, values in enumerate(rows, 2):
        if all(v is None or (isinstance(v, str) and not v.strip()) for v in values):
            continue
        ordinal += 1
        where = f"sheet {ws.title!r}, row {rownum}"
        row: dict[tuple, str] = {}
        for col, value in enumerate(values):
            role = roles.get(col)
            text = cell_text(value, path, f"sheet {ws.title!r}, cell {get_column_letter(col + 1)}{rownum}")
            if role is None and text.strip():
                raise SourceError(str(path), f"sheet {ws.title!r}, cell {get_column_letter(col + 1)}{rownum}",
                                  f"value {text[:40]!r} in a column without a header")
            if role is not None:
                row[role] = text
        number = row.get(("number",), "").strip() or str(ordinal)
        if not number.isdigit():
            raise SourceError(str(path), where, f"question number is {number!r}; expected a whole number")
        qid = f"{year}-{int(number)}"
        if qid in seen:
            raise SourceError(str(path), where, f"question number {number} already on row {seen[qid]}")
        seen[qid] = rownum
        src = f"{file_name} [{ws.title}] row {rownum} (Id {qid})"
        question = clean_text(row.get(("question",), ""), report, f"{src} question")
        reason = image_reason(row, question)
        if reason:
            report.drop("question needs an image", f"{src}: {reason}")
            yield Question(qid, src, question, [], reason)
            continue
        options = []
        for k in range(5):
            text = clean_text(row.get(("option", k), ""), report, f"{src} option {k + 1}")
            if not text:
                raise SourceError(str(path), where, f"empty {'correct answer' if k == 0 else f'wrong answer {k}'}; "
                                                    "expected five non-empty options")
            options.append(text)
        if not question:
            raise SourceError(str(path), where, "empty question; expected text")
        keys = [option_key(o) for o in options]
        if len(set(keys)) != len(keys):
            report.drop("two options with the same text", src)
            yield Question(qid, src, question, [], "two options with the same text")
            continue
        yield Question(qid, src, question, options)


def workbook_names(source: RawSource, report: ConversionReport) -> list[str]:
    """The workbooks to read; Excel's lock files (``~$name.xlsx``, left while a file is open) are skipped."""
    names = []
    for name in source.glob("*.xlsx"):
        if name.rsplit("/", 1)[-1].startswith("~$"):
            report.note(f"skipped Excel lock file {name}", "not a workbook")
        else:
            names.append(name)
    return names


def _reason(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"


def read_questions(source: RawSource, report: ConversionReport) -> tuple[list[Question], list[dict]]:
    """Usable questions in source order, and every exclusion with its reason."""
    questions: list[Question] = []
    excluded: list[dict] = []
    years: dict[str, str] = {}
    for name in workbook_names(source, report):
        path = source.path(name)
        try:
            wb = load_workbook(path, read_only=True, data_only=True, keep_vba=False)
        except (zipfile.BadZipFile, InvalidFileException, KeyError, OSError, ValueError, TypeError, SyntaxError) as err:
            # openpyxl reports a damaged or hostile file with many exception types, none naming it.
            raise SourceError(path, None, f"cannot open as an Excel .xlsx workbook ({_reason(err)})") from None
        try:
            for ws in wb.worksheets:
                ws.reset_dimensions()  # stored dimensions may be wrong in files not written by Excel
                if all(v is None for row in ws.iter_rows(max_row=1, values_only=True) for v in row):
                    report.note(f"skipped empty sheet {name} [{ws.title}]", "no header row")
                    continue
                year = sheet_year(name, ws.title, path)
                if year in years:
                    raise SourceError(path, f"sheet {ws.title!r}",
                                      f"year {year} already read from {years[year]}; expected one sheet per exam year")
                years[year] = f"{name} [{ws.title}]"
                for q in read_sheet(ws, path, name, year, report):
                    if q.excluded:
                        excluded.append({"Id": q.id, "where": q.where, "reason": q.excluded})
                    else:
                        questions.append(q)
        except (zipfile.BadZipFile, KeyError, OSError, ValueError, TypeError, SyntaxError) as err:
            raise SourceError(path, None, f"cannot read as an Excel .xlsx workbook ({_reason(err)})") from None
        finally:
            wb.close()
    return questions, excluded


def convert(source: RawSource, report: ConversionReport, seed: int) -> Iterator[tuple[str, dict]]:
    others = [n for n in source.glob("*") if n.lower().endswith((".xls", ".xlsm", ".xlsb", ".ods", ".csv"))]
    if others:
        raise SourceError(source.root / others[0], None,
                          "not an .xlsx workbook; save it as .xlsx (Excel workbook) to use it")
    if not workbook_names(source, ConversionReport()):
        raise MissingSource(["*.xlsx"])
    questions, excluded = read_questions(source, report)
    if not questions:
        raise SourceError(source.root, None, "no usable question in the workbooks")
    n_dev = min(DEV_SIZE, len(questions) // 2)
    n_test = min(TEST_CAP, len(questions) - n_dev)
    split_of = seeded_split([q.id for q in questions], {"dev": n_dev, "test": n_test},
                            seeded_rng("at-split", SPLIT_SEED))
    unplaced = [q for q in questions if q.id not in split_of]
    for q in unplaced:
        report.drop(f"beyond the {TEST_CAP}-question test cap (not drawn)", q.where)
    letters: dict[str, Counter] = {}
    for split in ("dev", "test"):
        items = [q for q in questions if split_of.get(q.id) == split]
        positions = balanced_positions(len(items), len(LETTERS), seeded_rng("at-letters", seed, split))
        letters[split] = Counter(LETTERS[p] for p in positions)
        for q, pos in zip(items, positions):
            wrong = list(q.options[1:])
            seeded_rng("at-options", seed, q.id).shuffle(wrong)
            options = place_at(wrong, pos, q.options[0])
            yield split, {"Id": q.id, "Question": q.question, **dict(zip(LETTERS, options)), "Correct": LETTERS[pos]}

    report.note("construction", (
        "One record per question with five options; the sheet lists the correct answer first. The correct answer is "
        "placed at a letter balanced over A-E within each split and the four wrong answers fill the other letters in a "
        f"per-question seeded order (task seed). dev = min({DEV_SIZE}, N // 2) and test = min({TEST_CAP}, N - dev) "
        f"questions drawn with split seed {SPLIT_SEED} (independent of --seed); questions that need an image or have "
        "two equal options are excluded; anything not placed in a split is reported."
    ))
    report.note("construction seed", seed)
    report.note("split seed", SPLIT_SEED)
    report.note("usable questions by year", dict(sorted(Counter(q.id.split("-")[0] for q in questions).items())))
    report.note("correct letter counts", {s: dict(sorted(c.items())) for s, c in letters.items()})
    report.note("excluded questions", excluded)
    report.note("questions in no split", [q.id for q in unplaced])

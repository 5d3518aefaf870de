"""Admission-test workbooks in the layout of raw/at/README.md, for fixtures and bad-input tests.

``python tests/at_workbooks.py`` rewrites the committed fixtures in tests/data/raw/at/.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from openpyxl import Workbook

from paths import TEST_DATA

IT_HEADER = ["N.", "Domanda", "Risposta 1", "Risposta 2", "Risposta 3", "Risposta 4", "Risposta 5", "Immagine"]
EN_HEADER = ["Number", "Question", "Correct answer", "Wrong answer 1", "Wrong answer 2", "Wrong answer 3", "Wrong answer 4"]


def write_workbook(path: Path, sheets: dict[str, list[list[object]]]) -> Path:
    """One workbook with the given sheets (first row = header); fixed metadata for stable files."""
    wb = Workbook()
    wb.remove(wb.active)
    for title, rows in sheets.items():
        ws = wb.create_sheet(title)
        for row in rows:
            ws.append(row)
    wb.properties.created = wb.properties.modified = dt.datetime(2023, 1, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    wb.save(path)
    return path


def question_rows(year: int, n: int, image_rows: tuple[int, ...] = (), with_image_column: bool = True) -> list[list[object]]:
    """``n`` synthetic questions, correct answer first; rows in ``image_rows`` need an image."""
    rows = []
    for i in range(1, n + 1):
        options = [f"Risposta corretta {year}/{i}", f"Distrattore uno {i}", f"Distrattore due {i}",
                   f"Distrattore tre {i}", f"Distrattore quattro {i}"]
        row: list[object] = [i, f"Quesito {i} dell'anno {year}: quale affermazione è corretta?", *options]
        if with_image_column:
            row.append("sì" if i in image_rows else None)
        rows.append(row)
    return rows


def write_fixtures(folder: Path) -> list[Path]:
    """The committed fixtures: 2017 (Italian header, own workbook), 2018 and 2019 (English header, one sheet each)."""
    y2017 = [IT_HEADER, *question_rows(2017, 30, image_rows=(4, 17))]
    y2017[9][1] = "Osservando l'immagine riportata, quale diagnosi è più probabile?"  # question 9: text refers to an image
    y2017[12][3] = 0.5  # a number cell is written as text
    y2017[20][1] = "  Quale farmaco\r\nè indicato? "  # CRLF and surrounding whitespace are repaired
    y2018 = [EN_HEADER, *question_rows(2018, 30, with_image_column=False)]
    y2018[6][5] = "risposta CORRETTA  2018/6"  # equals the correct answer after normalisation: excluded
    y2019 = [EN_HEADER, *question_rows(2019, 25, with_image_column=False), [None] * 7]
    return [
        write_workbook(folder / "SSM_2017.xlsx", {"Foglio1": y2017}),
        write_workbook(folder / "SSM_2018_2019.xlsx", {"2018": y2018, "Anno 2019": y2019}),
    ]


if __name__ == "__main__":
    for p in write_fixtures(TEST_DATA / "raw" / "at"):
        print(p)

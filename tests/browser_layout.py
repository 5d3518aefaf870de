"""Headless Chromium checks of report.html: the words of the run details each laid out on one line."""

from __future__ import annotations

import html as html_lib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# .ci/run installs Chromium and sets this: there the browser checks must run, a skip fails.
REQUIRE = "EVALITA_REQUIRE_CHROMIUM"


def require_chromium() -> str:
    """The Chromium to use; without one a skip, or a failure where EVALITA_REQUIRE_CHROMIUM=1 (CI)."""
    if CHROMIUM is None:
        message = "chromium not installed (apt-get install -y chromium)"
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{message}; {REQUIRE}=1: the browser checks must run here")
        pytest.skip(message)
    return CHROMIUM
# The flags the machine's docs give for a root, offline, headless Chromium.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]

# Run in the page once laid out: every word (a run of letters and digits: a path may wrap after its "/", a
# name after its "-", a word may not) of the elements named by SELECTOR measured with a Range; a word whose
# boxes lie on more than one line is broken. The findings go into the DOM.
MEASURE = """<script>
window.addEventListener("load", () => {
  const broken = [];
  for (const cell of document.querySelectorAll(%s)) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.data.matchAll(/[\\p{L}\\p{N}]+/gu)) {
        const range = document.createRange();
        range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
  }
  const out = document.createElement("pre"); out.id = "broken-words";
  out.textContent = JSON.stringify({checked: document.querySelectorAll(%s).length, broken: broken});
  document.body.appendChild(out);
});
</script>"""


def broken_words(report_html: Path, width: int, selector: str = ".models dt, .models dd, .models h3") -> tuple[int, list[str]]:
    """(cells checked, words laid out on more than one line) of ``report_html`` at ``width`` px in headless Chromium."""
    import json

    result = measured(report_html, width, MEASURE % (json.dumps(selector), json.dumps(selector)), "broken-words")
    return result["checked"], result["broken"]


def measured(report_html: Path, width: int, script: str, found_id: str):
    """What ``script`` (run in ``report_html`` once laid out at ``width`` px in headless Chromium) wrote as JSON into
    the element ``found_id``."""
    import json

    page = report_html.read_text("utf-8").replace("</body>", script + "</body>")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "report.html"
        copy.write_text(page, "utf-8")
        dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp}/profile", f"--window-size={width},1200",
                              "--virtual-time-budget=5000", "--dump-dom", f"file://{copy}"],
                             capture_output=True, text=True, timeout=120, check=True).stdout
    found = re.search(rf'<pre id="{found_id}">(.*?)</pre>', dom, re.S)
    assert found, f"the measuring script did not run: {dom[-500:]}"
    return json.loads(html_lib.unescape(found.group(1)))


# Run in the page once laid out: per table box (``div.scroll``, after its section's heading), the width its table needs
# and the width it is given; a table wider than its box is read behind a scrollbar.
WIDTHS = """<script>
window.addEventListener("load", () => {
  const boxes = [...document.querySelectorAll("div.scroll")].map(box => {
    let h = box.previousElementSibling;
    while (h && !/^H[23]$/.test(h.tagName)) h = h.previousElementSibling;
    return {heading: h ? h.textContent.trim() : "", needs: box.scrollWidth, given: box.clientWidth};
  });
  const out = document.createElement("pre"); out.id = "table-widths";
  out.textContent = JSON.stringify(boxes);
  document.body.appendChild(out);
});
</script>"""


def table_widths(report_html: Path, width: int) -> list[dict]:
    """Per table of ``report_html`` at ``width`` px in headless Chromium: its heading, the px it needs and is given."""
    return measured(report_html, width, WIDTHS, "table-widths")

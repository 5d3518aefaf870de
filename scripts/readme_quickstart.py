"""The README's quickstart, as .ci/run runs it: the bash block under "## Quickstart" read from README.md itself,
so that what CI runs and what a new user copies cannot drift apart.

    python scripts/readme_quickstart.py README.md             # prints the block (bash -euo pipefail runs it)
    python scripts/readme_quickstart.py README.md --results   # the results.json its run command writes

Every command of the block must succeed and the run must leave a complete results.json (.ci/run checks it with
``--check DIR``: the clone the block ran in). Standard library only: it runs before any venv exists.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

HEADING = "## Quickstart"


class QuickstartError(ValueError):
    """README.md without the block, or a run that did not leave what the block promises."""


def quickstart_block(readme: str) -> str:
    """The first ```bash block after the line starting with '## Quickstart' and before the next '## ' heading."""
    lines = readme.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(HEADING)), None)
    if start is None:
        raise QuickstartError(f"README.md has no '{HEADING}' heading")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    section = "\n".join(lines[start + 1:end])
    match = re.search(r"^```bash\n(.*?)^```$", section, re.S | re.M)
    if match is None or not match.group(1).strip():
        raise QuickstartError(f"README.md: no ```bash block under '{HEADING}'")
    return match.group(1)


def results_path(block: str) -> str:
    """Where the block's `evalita-eval run` writes results.json (its --output-dir)."""
    runs = [shlex.split(line, comments=True) for line in block.splitlines() if "evalita-eval run" in line]
    if len(runs) != 1:
        raise QuickstartError(f"the quickstart block has {len(runs)} `evalita-eval run` commands; expected 1")
    args = runs[0]
    if "--output-dir" not in args[:-1]:
        raise QuickstartError("the quickstart's `evalita-eval run` has no --output-dir: its results cannot be found")
    return str(Path(args[args.index("--output-dir") + 1]) / "results.json")


def check_results(folder: Path, block: str) -> str:
    """The run of the block finished every task it did not skip; returns a one-line summary."""
    path = folder / results_path(block)
    if not path.is_file():
        raise QuickstartError(f"{path}: the quickstart's run wrote no results.json")
    doc = json.loads(path.read_text("utf-8"))
    if doc.get("status") != "complete" or not doc.get("results"):
        raise QuickstartError(f"{path}: status {doc.get('status')!r} with {len(doc.get('results') or {})} task(s); expected a complete run")
    return f"{path}: complete, {len(doc['results'])} tasks, comparable_with_paper {doc.get('comparable_with_paper')}"


def main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="The README's quickstart block, for .ci/run.")
    parser.add_argument("readme", type=Path)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--results", action="store_true", help="print where the block's run writes results.json")
    what.add_argument("--check", type=Path, metavar="DIR", help="check the results.json the block wrote, run in DIR")
    args = parser.parse_args(argv)
    try:
        block = quickstart_block(args.readme.read_text("utf-8"))
        if args.results:
            print(results_path(block))
        elif args.check is not None:
            print(check_results(args.check, block))
        else:
            print(block, end="")
    except (QuickstartError, OSError, json.JSONDecodeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

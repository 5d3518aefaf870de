"""Data build: this tree vs a reference commit (default: its merge base with ``main``), same raw files, same run.

    .venv/bin/python bench/build_speed.py --raw /work/shared/raw              # 3 runs each, medians
    .venv/bin/python bench/build_speed.py --raw /work/shared/raw --quick      # 1 run each
    .venv/bin/python bench/build_speed.py --reference-ref 1e33ff5             # another reference

The reference's ``evalita_data``, ``converters``, ``schemas`` and ``eval`` come out of git
(``git archive``) and are laid out as the installed package; this tree's are copied
the same way, so both import alike. Each build runs in a fresh interpreter
(``python -c``), alternating reference and ours; "build" times the ``pipeline.build``
call, "wall" the whole process (interpreter start and imports included, as a user
sees ``evalita-data build``), "CPU" the user + system seconds of the process and its
workers (less sensitive to other jobs than wall time, blind to parallelism). Every output file of the two builds is compared byte
for byte; exit status 1 if any differs. The machine's load average is printed before
and after: ratios are comparable only within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Source folder -> package folder (pyproject.toml [tool.setuptools.package-dir]).
# The task registry may import evalita_eval (metric names), so eval/ comes along.
LAYOUT = {"evalita_data": "evalita_data", "converters": "evalita_data/converters", "schemas": "evalita_data/schemas", "eval": "evalita_eval"}

RUN = """
import json, sys, time
from pathlib import Path
t0 = time.perf_counter()
from evalita_data.building.pipeline import build
import evalita_data
assert evalita_data.__file__.startswith(sys.argv[3]), evalita_data.__file__
t1 = time.perf_counter()
build(Path(sys.argv[1]), Path(sys.argv[2]), ["faq", "hs", "ner", "rel", "sa", "wic"], progress=False)
print(json.dumps({"build": time.perf_counter() - t1, "imports": t1 - t0}))
"""


def layout_from_git(ref: str, dest: Path) -> Path:
    """``ref``'s package sources laid out as installed, under ``dest``."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", ref, *LAYOUT], check=True, capture_output=True).stdout
    src = dest / "src"
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(src, filter="data")
    return _layout(src, dest / "pkg")


def layout_from_tree(dest: Path) -> Path:
    return _layout(REPO, dest / "pkg")


def _layout(src: Path, pkg: Path) -> Path:
    for folder, target in LAYOUT.items():
        shutil.copytree(src / folder, pkg / target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return pkg


def run_build(pkg: Path, raw: Path, out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(pkg))
    t0, cpu0 = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, "-c", RUN, str(raw), str(out), str(pkg)], env=env, cwd=pkg, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"build with {pkg} failed:\n{done.stderr}")
    wall = time.perf_counter() - t0
    return dict(json.loads(done.stdout.strip().splitlines()[-1]), wall=wall, cpu=_children_cpu() - cpu0)


def _children_cpu() -> float:
    """User + system CPU seconds of finished child processes (and the workers they waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def differing_files(a: Path, b: Path) -> list[str]:
    names = sorted({p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()} | {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()})
    return [n for n in names if not ((a / n).is_file() and (b / n).is_file() and (a / n).read_bytes() == (b / n).read_bytes())], len(names)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_raw = Path("/work/shared/raw") if Path("/work/shared/raw").is_dir() else REPO / "raw"
    ap.add_argument("--raw", type=Path, default=default_raw, help=f"raw folder (default: {default_raw})")
    ap.add_argument("--reference-ref", default=None,
                    help="git commit or branch to compare with (default: where this branch left main, git merge-base HEAD main)")
    ap.add_argument("--repeat", type=int, default=3, help="builds of each side; medians are reported")
    ap.add_argument("--quick", action="store_true", help="one build of each side")
    args = ap.parse_args()
    repeat = 1 if args.quick else args.repeat
    if args.reference_ref is None:
        # main may have moved on (other changes to the cards): compare with the code this branch changed.
        base = subprocess.run(["git", "-C", str(REPO), "merge-base", "HEAD", "main"], capture_output=True, text=True)
        args.reference_ref = base.stdout.strip()[:12] if base.returncode == 0 else "main"
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ref_pkg = layout_from_git(args.reference_ref, tmp / "ref")
        our_pkg = layout_from_tree(tmp / "ours")
        ref, ours, bad, nfiles = [], [], [], 0
        for i in range(repeat):
            ref.append(run_build(ref_pkg, args.raw.resolve(), tmp / f"out-ref-{i}"))
            ours.append(run_build(our_pkg, args.raw.resolve(), tmp / f"out-ours-{i}"))
            diff, nfiles = differing_files(tmp / f"out-ref-{i}", tmp / f"out-ours-{i}")
            bad += diff
    load_after = os.getloadavg()
    med = {side: {k: statistics.median(r[k] for r in runs) for k in ("build", "wall", "cpu")} for side, runs in (("ref", ref), ("ours", ours))}
    print(
        f"build_speed raw={args.raw} reference={args.reference_ref} runs={repeat} | "
        f"reference {med['ref']['build']:.2f}s build, {med['ref']['wall']:.2f}s wall, {med['ref']['cpu']:.2f}s CPU | "
        f"ours {med['ours']['build']:.2f}s build, {med['ours']['wall']:.2f}s wall, {med['ours']['cpu']:.2f}s CPU | "
        f"speed-up {med['ref']['build'] / med['ours']['build']:.2f}x build, {med['ref']['wall'] / med['ours']['wall']:.2f}x wall, "
        f"{med['ref']['cpu'] / med['ours']['cpu']:.2f}x CPU | "
        f"{nfiles} files, {'all identical' if not bad else f'{len(set(bad))} DIFFER: ' + ', '.join(sorted(set(bad))[:5])} | "
        f"load {' '.join(f'{x:.1f}' for x in load_before)} -> {' '.join(f'{x:.1f}' for x in load_after)} on {os.cpu_count()} CPUs"
    )
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

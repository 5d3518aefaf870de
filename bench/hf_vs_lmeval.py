"""Ours ``hf`` against lm-eval's HF backend, each a whole process, in turn (issue 48).

    .venv/bin/python bench/hf_vs_lmeval.py --pairs 3                      # every row, the README's figures
    .venv/bin/python bench/hf_vs_lmeval.py --rows mc-0-default --pairs 1 --limit 2   # one row, a few minutes

Nothing is downloaded. The tasks are built from ``--raw`` and pushed in the official layout
(``evalita-data push --layout official --to-dir``); lm-eval 0.4.13 runs its own installed
``evalita_llm`` task files on that folder (only ``dataset_path`` changed:
tests/lm_eval_official.py, which runs them) and ours runs ``evalita-eval run --data hf:FOLDER``
on the same documents. Both use the ``hf`` model at ``--batch-size``, float32, on the CPU.

A row is a kind of work (``mc``: the log-likelihood tasks of ``--mc-tasks``; ``gen``: the
generations of ``--gen-tasks`` at ``--max-new-tokens``), a number of shots (0 or ``--shots``)
and torch's threads (``default``: what a user gets; ``1``: OMP_NUM_THREADS=1 on both sides and
``--threads 1`` on ours). Per row, ``--pairs`` pairs of fresh processes in turn, ours first
(A B A B ...); per side the medians and spread (min-max) of wall, user and system CPU seconds,
peak resident memory (``wait4``) and minor page faults, the ratio lm-eval / ours of each median
(above 1: ours is lower), and whether the answers are the same: per document the argmax choice
(MC) or the generated text, against lm-eval's, and the largest log-likelihood difference.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from lm_eval_official import task_copy  # noqa: E402  (the runner of lm-eval's own task files)

KINDS = ("mc", "gen")
THREADS = ("default", "1")
BUILT = {"wic", "te", "sa", "hs", "faq", "at", "ls", "ner", "rel", "sum"}  # registered tasks (what --raw may hold)


@dataclass(frozen=True)
class Row:
    kind: str
    shots: int
    threads: str

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.shots}-{self.threads}"


@dataclass
class Side:
    wall: float
    user: float
    sys: float
    peak_mib: float
    minflt: int


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=REPO / ".real-model" / "plain", help="model folder (docs/real-model.md)")
    ap.add_argument("--raw", type=Path, default=REPO / "raw")
    ap.add_argument("--rows", default=None, help="comma-separated KIND-SHOTS-THREADS (e.g. mc-0-default,gen-0-1); default: every row")
    ap.add_argument("--shots", type=int, default=3, help="the few-shot rows' examples")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--limit", type=int, default=8, help="documents per entry and prompt")
    ap.add_argument("--mc-tasks", default="wic,faq")
    ap.add_argument("--gen-tasks", default="ner_adg")
    ap.add_argument("--prompts", default=None, help="comma-separated (default: every prompt of each entry)")
    ap.add_argument("--max-new-tokens", type=int, default=32, help="generation rows")
    ap.add_argument("--batch-size", type=int, default=8)
    args = ap.parse_args(argv)
    every = [Row(k, s, t) for k in KINDS for s in (0, args.shots) for t in THREADS]
    names = args.rows.split(",") if args.rows else [r.name for r in every]
    unknown = set(names) - {r.name for r in every}
    if unknown:
        ap.error(f"--rows: unknown {', '.join(sorted(unknown))}; known: {', '.join(r.name for r in every)}")
    args.row_list = [r for r in every if r.name in names]
    if not (args.model / "config.json").is_file():
        ap.error(f"--model {args.model}: no config.json (scripts/real_model.py convert --dir .real-model)")
    return args


def entries(args: argparse.Namespace, kind: str) -> list[str]:
    return (args.mc_tasks if kind == "mc" else args.gen_tasks).split(",")


def pairs_of(args: argparse.Namespace, kind: str) -> list[str]:
    """ENTRY:PROMPT of every entry of the row's kind and its prompts (lm-eval's task files)."""
    from evalita_eval.sources.entries import select_entries

    out = []
    for entry in select_entries(entries(args, kind)):
        prompts = [p.name for p in entry.spec.prompts]
        out += [f"{entry.name}:{p}" for p in prompts if args.prompts is None or p in args.prompts.split(",")]
    return out


def prepare(args: argparse.Namespace, tmp: Path) -> tuple[Path, Path]:
    """The official-layout folder of the tasks the rows need, and lm-eval's task files pointing at it."""
    tasks = sorted({e.split("_")[0] for k in {r.kind for r in args.row_list} for e in entries(args, k)} & BUILT)
    cli = [sys.executable, "-m", "evalita_data.cli"]
    subprocess.run([*cli, "build", "--raw", str(args.raw), "--out", str(tmp / "build"), "--no-progress",
                    *[a for t in tasks for a in ("--task", t)]], check=True, stdout=subprocess.DEVNULL)
    hub = tmp / "hub"
    subprocess.run([*cli, "push", "--build", str(tmp / "build"), "--to-dir", str(hub), "--layout", "official",
                    *[a for t in tasks for a in ("--task", t)]], check=True, stdout=subprocess.DEVNULL)
    return hub, task_copy(tmp / "tasks", hub)


def timed(cmd: list[str], env: dict[str, str], log: Path) -> Side:
    """Runs ``cmd`` to its end; what the kernel counted for it (``wait4``)."""
    with open(log, "w") as fh:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[:4])} ... failed (exit {proc.returncode}): {log.read_text('utf-8', 'replace')[-1500:]}")
    return Side(wall, usage.ru_utime, usage.ru_stime, usage.ru_maxrss / 1024, usage.ru_minflt)


def side_command(side: str, row: Row, args: argparse.Namespace, hub: Path, tasks_dir: Path, out: Path) -> list[str]:
    if side == "ours":
        cmd = [sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(args.model), "--data", f"hf:{hub}",
               "--tasks", ",".join(entries(args, row.kind)), "--limit", str(args.limit), "--num-fewshot", str(row.shots),
               "--batch-size", str(args.batch_size), "--dtype", "float32", "--device", "cpu", "--output-dir", str(out),
               "--max-new-tokens", str(args.max_new_tokens), "--no-progress"]
        cmd += ["--prompts", args.prompts] if args.prompts else []
        return cmd + (["--threads", row.threads] if row.threads != "default" else [])
    return [sys.executable, str(REPO / "tests" / "lm_eval_official.py"), str(out), str(args.model), str(tasks_dir), str(args.limit),
            str(args.max_new_tokens), str(row.shots), *pairs_of(args, row.kind), "--batch-size", str(args.batch_size)]


def same_answers(ours_dir: Path, theirs_file: Path, pairs: list[str]) -> tuple[int, int, float]:
    """(documents answered alike, documents, largest |log-likelihood difference|)."""
    theirs = json.loads(theirs_file.read_text("utf-8"))
    same = total = 0
    worst = 0.0
    for pair in pairs:
        mine = [json.loads(line) for line in (ours_dir / "samples" / f"{pair.replace(':', '_')}.jsonl").read_text("utf-8").splitlines()]
        ref = theirs[pair]["samples"]
        total += max(len(mine), len(ref))
        for a, b in zip(mine, ref):
            if "loglikelihoods" in a:
                lls = [r[0][0] for r in b["resps"]]
                worst = max([worst] + [abs(x - y) for x, y in zip(a["loglikelihoods"], lls)])
                same += len(lls) == len(a["loglikelihoods"]) and lls.index(max(lls)) == a["loglikelihoods"].index(max(a["loglikelihoods"]))
            else:
                same += a["generation"] == b["resps"][0][0]
    return same, total, worst


def spread(values: list[float], fmt: str) -> str:
    med = statistics.median(values)
    return (fmt % med) + (f" ({fmt % min(values)}-{fmt % max(values)})" if len(values) > 1 else "")


def report(row: Row, runs: dict[str, list[Side]], answers: tuple[int, int, float], load: tuple[float, float]) -> None:
    fields = (("wall", "%.1f s"), ("user", "%.1f s"), ("sys", "%.1f s"), ("peak_mib", "%.0f MiB"), ("minflt", "%.0f"))
    for side, name in (("ours", "ours hf"), ("lmeval", "lm-eval HF")):
        cells = " | ".join(f"{f.replace('_mib', '')} {spread([getattr(s, f) for s in runs[side]], fmt)}" for f, fmt in fields)
        print(f"row {row.name:<16} {name:<10} | {cells}", flush=True)
    med = {side: {f: statistics.median(getattr(s, f) for s in runs[side]) for f, _ in fields} for side in runs}
    ratios = ", ".join(f"{f.replace('_mib', '')} {med['lmeval'][f] / max(med['ours'][f], 1e-9):.2f}x" for f, _ in fields)
    same, total, worst = answers
    print(f"row {row.name:<16} lm-eval / ours: {ratios} | same answers {same}/{total} (max |dLL| {worst:.2e}) "
          f"| {len(runs['ours'])} pairs | load {load[0]:.1f} -> {load[1]:.1f}", flush=True)


def run_row(row: Row, args: argparse.Namespace, hub: Path, tasks_dir: Path, tmp: Path) -> bool:
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               HF_DATASETS_CACHE=str(tmp / "hf-datasets"))
    if row.threads != "default":
        env["OMP_NUM_THREADS"] = row.threads
    runs: dict[str, list[Side]] = {"ours": [], "lmeval": []}
    load = os.getloadavg()[0]
    outs: dict[str, Path] = {}
    for i in range(args.pairs):
        for side in ("ours", "lmeval"):
            folder = tmp / f"{row.name}-{side}-{i}"
            folder.mkdir()
            out = outs[side] = folder / ("run" if side == "ours" else "lm-eval.json")
            runs[side].append(timed(side_command(side, row, args, hub, tasks_dir, out), env, folder / "log"))
    answers = same_answers(outs["ours"], outs["lmeval"], pairs_of(args, row.kind))
    report(row, runs, answers, (load, os.getloadavg()[0]))
    return answers[0] == answers[1]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    print(f"bench/hf_vs_lmeval.py | model {args.model} | limit {args.limit} | batch size {args.batch_size} | default threads "
          f"{torch.get_num_threads()} | mc {args.mc_tasks}, gen {args.gen_tasks} ({args.max_new_tokens} new tokens) | "
          f"prompts {args.prompts or 'all'} | few-shot rows {args.shots}-shot", flush=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-hf-lmeval-") as name:
        tmp = Path(name)
        hub, tasks_dir = prepare(args, tmp)
        alike = [run_row(row, args, hub, tasks_dir, tmp) for row in args.row_list]
    print(f"whole command {time.perf_counter() - t0:.0f} s", flush=True)
    return 0 if all(alike) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Replicas (eval/replicas): the balance of the whole benchmark's counted work, and 1 vs 2 replicas' wall time.

    .venv/bin/python bench/replicas.py --tokenizer /work/real-model/plain --build /work/evalita-build
    .venv/bin/python bench/replicas.py --build /work/evalita-build --time /work/real-model/plain \\
        --tasks wic,sa,ner --limit 10 --max-new-tokens 32 --threads 1 --rounds 2    # wall time

Balance (``--tokenizer``, no model): every entry and prompt of the benchmark (bench/work.py's
requests, zero- and 5-shot, paper sizes, synthetic records where the build has none) cut into
units by the replicas' own plan (``plan_units`` on an ``hf`` backend without weights, batch size
8: log-likelihood chunks of 32 requests, generation batches of 8) and assigned by ``assign``, one
call per entry and request kind; prints the counted tokens per replica and max/min - 1 (the goal:
within 10 %).

``--time MODEL``: ``evalita-eval run`` on MODEL (CPU, ``--tasks``, ``--limit``, ``--threads`` per
replica, a fresh output folder each time) with 1 and 2 replicas, alternating (1, 2, 1, 2 ...
``--rounds`` times) on each backend of ``--backends``; per run the wall time of the command
(Ray and model start-up included), the tasks' own wall time from its results.json, and the load
average before and after; then per backend the median of each and the ratio 1 replica / 2.
The scores of every run are checked equal (replicas change no number).

The issue-38 check (two replicas at least 1.7x faster than one, on a quiet machine, each replica
pinned to one thread, a run of at least five minutes for one replica with several tasks and prompts,
small calls included: the ner entries' calls hold 2 prompts x ``--limit`` generations):

    .venv/bin/python bench/replicas.py --build /work/bench-runs/evalita-build \
        --time /work/main/.real-model/plain --tasks wic,sa,faq,ner --limit 8 --max-new-tokens 32 \
        --threads 1 --rounds 1

Estimated 5-6 minutes for the one-replica run on the quiet 2-core machine (then about half that
for two): the quiet measurement above, wic,sa,ner at ``--limit 10`` in 163 s of task time, is
16 s a document; a ``--limit 2`` run of these four tasks on the loaded machine (2026-11-25,
per-task ``timing`` of results.json) put faq at 1.5x wic+sa+ner a document, so about 40 s a
document in all, 320 s at ``--limit 8``, plus the model load. The ratio line reads ``x`` 1 replica /
2; the goal is x1.70 or more on wall.

The issue-46 check (x1.80 or more on wall, quiet machine) is the default run: ``--build`` and
``--time`` as above, ``--threads 1``. Under each 2-replica run, its breakdown: the start (the driver's
own, Ray's, the loads: replica 0 in the driver loads while Ray starts, the first call), per request
kind the units, busy and idle time and the tail, and the end (results, the replicas closed, Ray's
shutdown, the CLI's tables and the exit).
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from work import benchmark_docs, benchmark_requests  # noqa: E402  (bench/ is on sys.path when run as a script)
from evalita_eval.replicas.plan import assign, plan_units  # noqa: E402
from evalita_eval.sources.entries import select_entries  # noqa: E402


def weightless_hf(tokenizer_dir: str, max_length: int, batch_size: int):
    """An ``hf`` backend with a tokenizer and no model: enough for the plan (it never runs a pass)."""
    from evalita_eval.backends.engine_common import load_tokenizer
    from evalita_eval.backends.hf import HFBackend

    backend = HFBackend.__new__(HFBackend)
    backend.tokenizer, backend.max_length, backend.batch_size, backend.options = load_tokenizer(tokenizer_dir, None, False), max_length, batch_size, None
    return backend


def balance(backend, docs: dict, replicas: int, shots: tuple[int, ...]) -> list[int]:
    """Counted tokens per replica over every entry, prompt setting and request kind."""
    load = [0] * replicas
    for k in shots:
        for entry in select_entries(None):
            ll, gen = benchmark_requests(docs, k, [entry.name])
            for kind, requests in (("loglikelihood", ll), ("generate_until", gen)):
                units = plan_units(backend, kind, requests)
                for r, shard in enumerate(assign([u.tokens for u in units], replicas)):
                    load[r] += sum(units[u].tokens for u in shard)
    return load


# `evalita-eval run` with the replicas' timeline logged (eval/replicas/backend.py logs it at INFO when they close).
RUN = ("import logging, sys; log = logging.getLogger('evalita_eval.replicas'); log.setLevel(logging.INFO); "
       "log.addHandler(logging.StreamHandler()); from evalita_eval.cli import main; sys.argv[0] = 'evalita-eval'; main()")
TIMELINE = "replica timeline: "


def timed_run(model: str, args: argparse.Namespace, backend: str, replicas: int) -> tuple[float, float, dict, dict | None]:
    """One `evalita-eval run` in a fresh folder: (command wall seconds, the tasks' wall seconds, scores, the replicas'
    timeline with the command's start and end, or None for one replica)."""
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-c", RUN, "run", "--model", model, "--data", args.build, "--tasks", args.tasks,
                   "--limit", str(args.limit), "--max-new-tokens", str(args.max_new_tokens), "--threads", str(args.threads),
                   "--backend", backend, "--no-progress", "--output-dir", out, "--backend-arg", f"data_parallel_size={replicas}"]
        began = time.time()
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ended = time.time()
        if done.returncode:
            raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        doc = json.loads((Path(out) / "results.json").read_text("utf-8"))
    said = [line[len(TIMELINE):] for line in done.stderr.splitlines() if line.startswith(TIMELINE)]
    timeline = {**json.loads(said[-1]), "command": began, "exited": ended} if said else None
    return ended - began, sum(t["wall_s"] for t in doc["timing"].values()), doc["results"], timeline


def breakdown(t: dict) -> list[str]:
    """Where a replicated run's wall time went (seconds from the command's start), from its timeline."""
    calls, loads = t["calls"], t["loads"]
    first = calls[0]["began"] if calls else t["closing"]
    lines = [f"  before the replicas start (interpreter, imports, options, data read): {t['began'] - t['command']:.1f} s",
             f"  Ray start: {t['ray_ready'] - t['began']:.1f} s",
             "  model loads (each from its start to ready; replica 0 in the driver from before Ray's start where it runs "
             "there, the others in their Ray actors): " + ", ".join(f"{b - a:.1f} s (ready at {b - t['command']:.1f} s)" for a, b in loads),
             f"  first call at {first - t['command']:.1f} s (replica 0 ready at {t['first_ready'] - t['command']:.1f} s; "
             "then the driver names the folder and plans the run)"]
    for c in calls:
        wall = c["ended"] - c["planned"]
        idle = [wall - b for b in c["busy"]]
        lines.append(f"  {c['kind']}: {c['units']} units, planned in {c['planned'] - c['began']:.1f} s, ran {wall:.1f} s; busy "
                     + ", ".join(f"{b:.1f} s" for b in c["busy"]) + " (idle " + ", ".join(f"{i:.1f} s" for i in idle)
                     + f"); tail (one replica alone at the end) {max(c['ends']) - min(c['ends']):.1f} s")
    between = sum(b["began"] - a["ended"] for a, b in zip(calls, calls[1:]))
    end = calls[-1]["ended"] if calls else t["closing"]
    lines.append(f"  driver between calls {between:.1f} s; after the last call: scores and results {t['closing'] - end:.1f} s, "
                 f"replicas closed {t['stopped'] - t['closing']:.1f} s, Ray shut down {t['closed'] - t['stopped']:.1f} s, "
                 f"tables and exit {t['exited'] - t['closed']:.1f} s")
    return lines


def time_replicas(args: argparse.Namespace) -> None:
    """1 and 2 replicas alternating on each backend; a line per run (the 2-replica run's time breakdown), then the
    medians and ratios."""
    print(f"{os.cpu_count()} CPUs; {args.tasks} --limit {args.limit} --max-new-tokens {args.max_new_tokens}, {args.threads} thread(s) a replica")
    for backend in args.backends.split(","):
        walls: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
        scores: list[dict] = []
        for _ in range(args.rounds):
            for replicas in (1, 2):
                before = os.getloadavg()[0]
                wall, tasks, results, timeline = timed_run(args.time, args, backend, replicas)
                walls[replicas].append((wall, tasks))
                scores.append(results)
                print(f"{backend} {replicas} replica(s): {wall:.1f} s wall, tasks {tasks:.1f} s (load {before:.2f} before, {os.getloadavg()[0]:.2f} after)")
                if timeline is not None:
                    print("\n".join(breakdown(timeline)), flush=True)
        one, two = ([statistics.median(w[k] for w in walls[n]) for k in (0, 1)] for n in (1, 2))
        same = all(s == scores[0] for s in scores)
        print(f"{backend}: median wall {one[0]:.1f} s (1 replica) vs {two[0]:.1f} s (2): x{one[0] / two[0]:.2f}; "
              f"tasks {one[1]:.1f} s vs {two[1]:.1f} s: x{one[1] / two[1]:.2f}; scores {'equal' if same else 'DIFFER'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default=None, help="model folder whose tokenizer counts the tokens (the balance)")
    ap.add_argument("--build", default=None, help="a build folder (evalita-data build); entries it lacks are synthesised")
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--time", metavar="MODEL", default=None, help="time evalita-eval run with 1 and 2 replicas on MODEL (needs --build)")
    ap.add_argument("--backends", default="hf")
    ap.add_argument("--tasks", default="wic,sa,faq,ner_adg")
    ap.add_argument("--limit", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (and Ray CPUs) of each replica")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    if args.tokenizer:
        docs = benchmark_docs(Path(args.build) if args.build else None)
        load = balance(weightless_hf(args.tokenizer, args.max_length, 8), docs, args.replicas, (0, 5))
        print("counted tokens per replica: " + ", ".join(f"{n:,}" for n in load))
        print(f"max/min - 1: {100 * (max(load) / max(1, min(load)) - 1):.2f} % (goal: within 10 %)")
    if args.time:
        if not args.build:
            ap.error("--time needs --build")
        time_replicas(args)


if __name__ == "__main__":
    main()

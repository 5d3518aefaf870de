"""Replicas (eval/replicas): the balance of the whole benchmark's counted work, and 1 vs 2 replicas' wall time.

    .venv/bin/python bench/replicas.py --tokenizer /work/real-model/plain --build /work/evalita-build
    .venv/bin/python bench/replicas.py --tokenizer /work/real-model/plain --build /work/evalita-build \\
        --time /work/real-model/plain --limit 20          # wall time: needs a quiet machine

Balance (no model): every entry and prompt of the benchmark (bench/work.py's requests, zero- and
5-shot, paper sizes, synthetic records where the build has none) cut into units by the replicas'
own plan (``plan_units`` on an ``hf`` backend without weights, batch size 8: log-likelihood
chunks of 32 requests, generation batches of 8) and assigned by ``assign``, one call per entry
and request kind; prints the counted tokens per replica and max/min - 1 (the goal: within 10 %).

``--time MODEL``: ``evalita-eval run`` on MODEL with 1 and then 2 replicas (CPU, ``--limit``),
the wall time of each and the load average before and after each.
"""

from __future__ import annotations

import argparse
import os
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


def wall_time(model: str, build: str, limit: int, replicas: int) -> float:
    with tempfile.TemporaryDirectory() as out:
        args = [sys.executable, "-m", "evalita_eval.cli", "run", "--model", model, "--data", build, "--limit", str(limit), "--no-progress",
                "--output-dir", out, "--backend-arg", f"data_parallel_size={replicas}"]
        began = time.perf_counter()
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - began


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="model folder whose tokenizer counts the tokens")
    ap.add_argument("--build", default=None, help="a build folder (evalita-data build); entries it lacks are synthesised")
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--time", metavar="MODEL", default=None, help="also time evalita-eval run with 1 and 2 replicas on MODEL")
    ap.add_argument("--limit", type=int, default=20)
    args = ap.parse_args()
    docs = benchmark_docs(Path(args.build) if args.build else None)
    load = balance(weightless_hf(args.tokenizer, args.max_length, 8), docs, args.replicas, (0, 5))
    print("counted tokens per replica: " + ", ".join(f"{n:,}" for n in load))
    print(f"max/min - 1: {100 * (max(load) / max(1, min(load)) - 1):.2f} % (goal: within 10 %)")
    if args.time:
        for n in (1, args.replicas):
            before = os.getloadavg()[0]
            seconds = wall_time(args.time, args.build, args.limit, n)
            print(f"{n} replica(s): {seconds:.1f} s wall (load average {before:.2f} before, {os.getloadavg()[0]:.2f} after)")


if __name__ == "__main__":
    main()

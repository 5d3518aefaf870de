"""vllm replicas (eval/replicas/prefix_groups.py): vLLM's own counters with 1 and 2 replicas.

    .venv-vllm/bin/python bench/vllm_replicas.py --model /work/real-model/plain --build /work/evalita-build \\
        --tasks sa,wic,faq --limit 6 --num-fewshot 1

The Runner on MODEL (``--backend vllm``, float32, eager, KV blocks of ``--block-size`` tokens,
stats on, 1 GiB of KV cache per engine), each side in a fresh interpreter (one vLLM engine per
process): one replica (the plain path), then ``data_parallel_size=2`` on a local Ray started for
the run; for each: vLLM's prompt tokens, of them served by the prefix cache, the computed prompt
tokens (the difference, summed over the replicas), each replica's share, the wall time and the
load average before and after. The computed prompt tokens are the goal (2 replicas within 5 % of
one); the wall time needs a quiet machine and as many cores as replicas.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vllm_sides import counted_run, engine_args, run_parser, run_sides, write_side  # noqa: E402  (bench/ on sys.path)


def side(args: argparse.Namespace, replicas: int, out: Path) -> dict[str, Any]:
    from evalita_eval.api import BackendOptions
    from evalita_eval.replicas import create_backend

    backend = create_backend("vllm", BackendOptions(model=args.model, dtype="float32",
                                                    extra={"vllm_engine_args": engine_args(args), "data_parallel_size": str(replicas)}))
    run = counted_run(args, backend, out)
    # Per replica: counters since the replicas started (their engines are fresh for the run, bar warm-up).
    each = run["per_replica"] if replicas > 1 else [run["after"]]
    shares = [c["vllm:prompt_tokens"] - c["vllm:prompt_tokens_cached"] for c in each]
    return {"replicas": replicas, "counters": run["counters"], "computed": run["computed"], "computed_per_replica": shares,
            "seconds": run["seconds"], "load_1min": run["load_1min"], "results": json.loads((out / "results.json").read_text("utf-8"))["results"]}


def main() -> None:
    ap = run_parser(__doc__, "sa,wic,faq", 6)
    ap.add_argument("--side", type=int, help=argparse.SUPPRESS)  # internal: one side (its replicas) in this process
    args = ap.parse_args()
    if args.side:
        write_side(args, side)
        return
    rows = run_sides(__file__, [(str(replicas), dict(os.environ)) for replicas in (1, 2)])
    same = rows[0].pop("results") == rows[1].pop("results")
    print(f"{args.tasks}, --limit {args.limit}, {args.num_fewshot}-shot, KV blocks of {args.block_size}, {os.cpu_count()} cores; "
          f"the same scores: {same}")
    print("| replicas | prompt tokens | from the prefix cache | computed prompt tokens | per replica | vs 1 replica | wall s | load (1 min) before, after |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        c = row["counters"]
        print(f"| {row['replicas']} | {c['vllm:prompt_tokens']:.0f} | {c['vllm:prompt_tokens_cached']:.0f} | {row['computed']:.0f} "
              f"| {', '.join(f'{x:.0f}' for x in row['computed_per_replica'])} | {row['computed'] / rows[0]['computed'] - 1:+.2%} "
              f"| {row['seconds']:.1f} | {row['load_1min'][0]:.2f}, {row['load_1min'][1]:.2f} |")


if __name__ == "__main__":
    main()

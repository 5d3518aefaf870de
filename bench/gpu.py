"""The public benchmark on one GPU: our vllm and hf backends against lm-eval's HF and vLLM.

    python bench/gpu.py                                   # on a CUDA machine: Llama-3.1-8B shape, random bf16 weights
    python bench/gpu.py --shape tiny --device cpu --limit 1 --max-new 8      # the same, end to end, on a CPU in seconds
    .venv/bin/python bench/gpu.py --model /work/main/.real-model/plain --device cpu --threads 1 --limit 5 \\
        --engines ours-hf,lmeval-hf --markdown            # the README's cost table

Nothing is downloaded: (1) the data is built from ``raw/`` into a temporary folder (the
entries without public raw files get synthetic records of the real field lengths,
bench/work.py); (2) the model is a ``LlamaForCausalLM`` of Llama-3.1-8B's shape (32 x 4096,
32 heads, 8 KV heads, 14336 MLP, 128256 vocabulary, rope theta 500000, llama3 rope scaling)
with seeded random weights in bfloat16, saved with the byte-level BPE tokenizer bench/tiny.py
trains on the raw Italian files (4096 ids, all inside the model's vocabulary), or ``--model``;
(3) every task entry and prompt, zero-shot and 5-shot, at ``--limit`` documents per entry
(generation with the tasks' own budgets) is one call per engine, each engine in a fresh
process (bench/gpu_worker.py); (4) it prints per task the requests, prompt tokens and each
engine's seconds, then per engine the wall time, the model tokens (counted by bench/work.py's
rules for that engine's batching, plus the tokens it generated), the peak memory and the
ratios. An engine that cannot run here (vLLM not installed, no GPU) is reported, not fatal.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded, on the GPU machine nothing can be
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import tiny  # noqa: E402  (bench/ is on sys.path when run as a script)
from gpu_report import report  # noqa: E402
import work  # noqa: E402
from evalita_eval.api import GenRequest  # noqa: E402
from evalita_eval.sources.entries import select_entries  # noqa: E402

ENGINES = {"ours-vllm": "ours vllm", "ours-hf": "ours hf", "ours-hf-auto": "ours hf, batch size auto", "lmeval-hf": "lm-eval HF", "lmeval-vllm": "lm-eval vLLM"}
GPU_LIMIT = 2  # documents per entry and setting on a GPU: four engines of an 8B model in 10 minutes (an estimate)
BLOCK_SIZE = 16  # vLLM's KV block size on GPUs, for the counted model tokens
LLAMA8B_MAX_LENGTH = 8192  # every engine reads at most this many tokens (Llama 3's original context)


@dataclass
class Row:
    """The requests of one task entry and setting: one call per engine."""

    entry: str
    shots: int
    kind: str  # "ll" or "gen"
    requests: list  # LLRequest or GenRequest
    docs: int  # documents used
    full_docs: int  # documents of the whole evaluation split (the projection's scale)
    seconds: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    answers: dict[str, list] = field(default_factory=dict)
    prompt_tokens: int = 0

    @property
    def key(self) -> str:
        return f"{self.entry} {self.shots}-shot"

    def payload(self) -> dict[str, Any]:
        reqs = [[r.context, r.continuation] if self.kind == "ll" else [r.context, list(r.stop), r.max_new_tokens] for r in self.requests]
        return {"key": self.key, "kind": self.kind, "requests": reqs}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=("llama8b", "tiny"), default="llama8b", help="the random model's shape (tiny: 2 layers x 64)")
    ap.add_argument("--model", type=Path, help="an existing model folder instead of a random one (e.g. the real model's plain/)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when there is one)")
    ap.add_argument("--dtype", default=None, help="default: bfloat16 on CUDA, float32 on CPU")
    ap.add_argument("--limit", type=int, default=None, help=f"documents per task entry and setting (default: {GPU_LIMIT})")
    ap.add_argument("--max-new", type=int, default=None, help="cap on the generation budgets (default: each task's own)")
    ap.add_argument("--max-length", type=int, default=None, help=f"tokens an engine reads (default: {LLAMA8B_MAX_LENGTH} for llama8b, else the model's)")
    ap.add_argument("--batch-size", type=int, default=8, help="ours hf and lm-eval HF")
    ap.add_argument("--threads", type=int, default=None, help="torch threads in each engine's process (CPU)")
    ap.add_argument("--engines", default=",".join(ENGINES), help="comma-separated: " + ", ".join(ENGINES))
    ap.add_argument("--tasks", default=None, help="task ids or entry names (default: all)")
    ap.add_argument("--budget-s", type=float, default=None, help="no engine is started after this many seconds (default: 540 on CUDA)")
    ap.add_argument("--vllm-eager", action="store_true", help="vLLM without CUDA graphs (shorter start-up)")
    ap.add_argument("--raw", type=Path, default=work.REPO / "raw")
    ap.add_argument("--markdown", action="store_true", help="also print the per-task table as Markdown")
    ap.add_argument("--peak-tflops", type=float, default=None, help="the device's dense bf16 peak (default: known GPUs, gpu_report.PEAK_TFLOPS)")
    args = ap.parse_args(argv)
    import torch

    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    args.dtype = args.dtype or ("bfloat16" if args.device.startswith("cuda") else "float32")
    args.limit_default = args.limit is None
    args.limit = args.limit or GPU_LIMIT
    if args.budget_s is None and args.device.startswith("cuda"):
        args.budget_s = 540.0
    unknown = set(args.engines.split(",")) - set(ENGINES)
    if unknown:
        ap.error(f"--engines: unknown {', '.join(sorted(unknown))}; known: {', '.join(ENGINES)}")
    if args.shape == "llama8b" and args.model is None and not args.device.startswith("cuda"):
        ap.error("--shape llama8b needs 16 GB of bfloat16 weights: run it on a CUDA machine, or add --shape tiny (or --model PATH) on a CPU")
    return args


def make_model(args: argparse.Namespace, tmp: Path) -> tuple[Path, str]:
    """The model folder and its description (nothing downloaded)."""
    if args.model:
        return args.model, str(args.model)
    if args.shape == "tiny":
        return tiny.build_tiny_model(tmp / "model", layers=2, hidden=64, corpus_lines=5000), "random tiny Llama 2 x 64 (seed 0)"
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok_dir = tiny.build_tiny_model(tmp / "tokenizer", layers=1, hidden=64)  # only its tokenizer is used
    out = work.llama8b_folder(tok_dir, tmp / "llama8b")
    config = LlamaConfig.from_pretrained(out)
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(args.device):
            model = LlamaForCausalLM(config)
        model.save_pretrained(out, safe_serialization=True)
    finally:
        torch.set_default_dtype(default)
    del model
    import gc

    gc.collect()
    torch.cuda.empty_cache()  # the engines' processes get the whole GPU
    return out, "Llama-3.1-8B shape, random bfloat16 weights (seed 0), bench/tiny.py's 4096-id tokenizer"


def matmul_params(model: Path) -> int:
    """Weights one token's pass multiplies by (every parameter but the input embedding; a tied output head counted
    once): model FLOPs are 2 x this per model token (attention scores left out, so MFU is a lower bound)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model)
    with torch.device("meta"):
        net = AutoModelForCausalLM.from_config(config)
    total = sum(p.numel() for p in net.parameters())  # shared (tied) tensors once
    return total if getattr(config, "tie_word_embeddings", False) else total - net.get_input_embeddings().weight.numel()


def make_rows(args: argparse.Namespace, tmp: Path) -> list[Row]:
    from evalita_data.building.pipeline import build

    build(args.raw, tmp / "build", tasks=list(work.PUBLIC), progress=False, workers=1)
    docs = work.benchmark_docs(tmp / "build")
    rows = []
    for entry in select_entries(args.tasks.split(",") if args.tasks else None):
        eval_docs, pool, origin = docs[entry.name]
        small = {entry.name: (eval_docs[: args.limit], pool, origin)}
        for k in work.FEWSHOT_K:
            ll, gen = work.benchmark_requests(small, k, [entry.name])
            if args.max_new:
                gen = [GenRequest(r.context, r.stop, min(r.max_new_tokens, args.max_new)) for r in gen]
            used = min(args.limit, len(eval_docs))
            rows.append(Row(entry.name, k, "ll" if ll else "gen", ll or gen, used, len(eval_docs)))
    return rows


def unavailable(engine: str, device: str) -> str | None:
    """Why ``engine`` cannot run in this Python, or None."""
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            return f"--device {device}, but torch sees no CUDA device"
    if "vllm" in engine and importlib.util.find_spec("vllm") is None:
        return "vllm is not installed in this Python (pip install -e '.[vllm]')"
    if engine.startswith("lmeval") and importlib.util.find_spec("lm_eval") is None:
        return "lm-eval is not installed in this Python"
    return None


def run_engine(engine: str, args: argparse.Namespace, model: Path, max_length: int, rows: list[Row], tmp: Path, timeout: float | None) -> dict | str:
    """The worker's answer, or one line saying why there is none."""
    job = {"engine": engine, "model": str(model), "device": args.device, "dtype": args.dtype, "batch_size": None if engine.endswith("-auto") else args.batch_size,
           "max_length": max_length, "threads": args.threads, "vllm_eager": args.vllm_eager, "rows": [r.payload() for r in rows]}
    job_file, out_file = tmp / f"{engine}.job.json", tmp / f"{engine}.out.json"
    job_file.write_text(json.dumps(job), "utf-8")
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).with_name("gpu_worker.py")), str(job_file), str(out_file)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"stopped after {timeout:.0f} s (the time budget)"
    if proc.returncode != 0 or not out_file.exists():
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if "Error" in line.split(":")[0]] or lines[-1:] or ["no output"]
        return f"failed (exit {proc.returncode}): {errors[-1][:300]}"
    out = json.loads(out_file.read_text("utf-8"))
    out["process_s"] = time.perf_counter() - start
    return out


def count_tokens(engine: str, row: Row, tokenizer: Any, max_length: int, batch: int) -> int:
    """Model tokens ``engine`` computes for the row (bench/work.py's rules; no padding, no cache hits),
    plus the tokens of its answers for a generation (re-encoded from the returned text)."""
    if row.kind == "ll":
        pairs = work.encode_requests(tokenizer, row.requests)
        counters = {"ours-hf": lambda: work.ours_hf(pairs, max_length, batch), "ours-hf-auto": lambda: work.ours_hf(pairs, max_length, batch),
                    "lmeval-hf": lambda: work.lmeval_hf(pairs, max_length, batch),
                    "ours-vllm": lambda: work.ours_vllm(pairs, max_length, BLOCK_SIZE), "lmeval-vllm": lambda: work.lmeval_vllm(pairs, max_length)}
        return counters[engine]().tokens
    prompts = work.gen_prompts(tokenizer, row.requests, max_length)
    read = work.cached_prompts(prompts, BLOCK_SIZE).tokens if "vllm" in engine else sum(map(len, prompts))
    return read + sum(len(tokenizer.encode(t, add_special_tokens=False)) for t in row.answers[engine])


def prompt_tokens(row: Row, tokenizer: Any, max_length: int) -> int:
    """Tokens of the row's requests as written (log-likelihood: context + continuation; generation: the cut prompt)."""
    if row.kind == "ll":
        return sum(len(c) + len(x) for c, x in work.encode_requests(tokenizer, row.requests))
    return sum(map(len, work.gen_prompts(tokenizer, row.requests, max_length)))


def run_engines(args: argparse.Namespace, model: Path, max_length: int, rows: list[Row], tmp: Path, t0: float) -> dict[str, dict | str]:
    """Each engine in turn (its answers into the rows), or why it did not run; none is started once the budget is spent."""
    outcomes: dict[str, dict | str] = {}
    for engine in args.engines.split(","):
        why = unavailable(engine, args.device)
        left = None if args.budget_s is None else args.budget_s - (time.perf_counter() - t0)
        if why is None and left is not None and left < 30:
            why = f"not started: {args.budget_s:.0f} s budget spent"
        done = outcomes[engine] = why or run_engine(engine, args, model, max_length, rows, tmp, left)
        print(f"[bench/gpu.py {time.perf_counter() - t0:.0f} s] {engine}: " + (done if isinstance(done, str) else f"{done['process_s']:.1f} s"),
              file=sys.stderr, flush=True)  # progress, for a run stopped before its report
        if isinstance(done, dict):
            for row, got in zip(rows, done["rows"]):
                row.seconds[engine], row.answers[engine] = got["seconds"], got["results"]
    return outcomes


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as name:
        tmp = Path(name)
        model, described = make_model(args, tmp)
        rows = make_rows(args, tmp)
        from evalita_eval.backends.engine_common import load_tokenizer, model_max_length

        tokenizer = load_tokenizer(str(model), None, False)
        default_length = LLAMA8B_MAX_LENGTH if args.shape == "llama8b" and not args.model else model_max_length(str(model), tokenizer, None, False)
        max_length = args.max_length or default_length
        outcomes = run_engines(args, model, max_length, rows, tmp, t0)
        for row in rows:
            row.prompt_tokens = prompt_tokens(row, tokenizer, max_length)
            for engine in row.answers:
                row.tokens[engine] = count_tokens(engine, row, tokenizer, max_length, args.batch_size)
        args.matmul_params = matmul_params(model)
        report(args, described, max_length, rows, outcomes, time.perf_counter() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())

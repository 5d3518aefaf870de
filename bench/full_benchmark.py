"""Every task and prompt of the benchmark on one model: seconds per task and the projected total.

    .venv/bin/python bench/full_benchmark.py --layers 2 --hidden 64 --limit 20      # CPU smoke run
    .venv/bin/python bench/full_benchmark.py --model-dir /path/to/checkpoint
    .venv/bin/python bench/full_benchmark.py --llama8b                              # CUDA, bf16

Records are the bench data (TE, FAQ, AT; see data.py) and synthetic records of the
paper's split sizes and field lengths for the other tasks, so no dataset is needed.
``--limit`` scores that many items per task and projects each task's time linearly to
its full evaluation split. ``--llama8b`` builds a random-weight model with the shape of
Llama-3-8B (32 x 4096, GQA 32/8, 14336 MLP, 128256 vocabulary) directly on the GPU in
bfloat16 and lets FastBackend probe its token budget once; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import data  # noqa: E402  (bench/ is on sys.path when run as a script)
import tiny  # noqa: E402
import torch  # noqa: E402
from evalita_data.registry import TASK_IDS, get_task  # noqa: E402
from evalita_eval.api import GenRequest  # noqa: E402
from evalita_eval.fast import FastBackend  # noqa: E402

LLAMA3_8B = dict(
    hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
    vocab_size=128256, max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
)


def llama8b(tokenizer_dir: Path, device: str):
    """A Llama-3-8B-shaped model with random weights, built on ``device`` in bfloat16."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = LlamaConfig(**LLAMA3_8B, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    with torch.random.fork_rng(devices=[]), torch.device(device):
        torch.manual_seed(0)
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            model = LlamaForCausalLM(config).eval()
        finally:
            torch.set_default_dtype(default)
    return model, tok


def run_task(backend: FastBackend, task_id: str, limit: int | None) -> tuple[int, int, float]:
    """(items scored, items in the full split, seconds) for all prompts of one task."""
    spec = get_task(task_id)
    full = data.eval_size(task_id)
    n = min(full, limit) if limit else full
    records = data.synthetic_records(task_id, n)
    start = time.perf_counter()
    if spec.output_type == "multiple_choice":
        requests = [r for p in spec.prompts for item in data.mc_items(task_id, p.name, records) for r in item.requests()]
        backend.loglikelihood(requests)
    else:
        requests = [
            GenRequest(ctx, tuple(spec.stop), spec.max_new_tokens) for p in spec.prompts for ctx in data.gen_contexts(task_id, p.name, records)
        ]
        backend.generate_until(requests)
    return n, full, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", type=Path, help="a saved checkpoint (default: a random-weight one)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--llama8b", action="store_true", help="random-weight Llama-3-8B shape (bf16 on CUDA)")
    ap.add_argument("--tasks", default=",".join(TASK_IDS))
    ap.add_argument("--limit", type=int, default=None, help="items per task; times are projected to the full split")
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--max-batch-tokens", type=int, default=None, help="default: probed on CUDA, FastBackend's default elsewhere")
    ap.add_argument("--threads", type=int, default=None, help="torch threads on CPU (default: torch's)")
    ap.add_argument("--quick", action="store_true", help="3 items per task (a smoke run of a minute or two on CPU)")
    args = ap.parse_args()
    if args.quick:
        args.limit = 3
    device = "cuda" if torch.cuda.is_available() else "cpu"
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        if args.llama8b:
            tok_dir = Path(tmp) / "tok"
            tiny.build_tiny_model(tok_dir, layers=1, hidden=64)  # only its tokenizer is used
            model, tok = llama8b(tok_dir, device)
            name = "llama3-8b-shape (random, bf16)"
        else:
            model_dir = args.model_dir or tiny.build_tiny_model(Path(tmp) / "model", layers=args.layers, hidden=args.hidden)
            model, tok = tiny.load(model_dir, dtype=torch.bfloat16 if device == "cuda" else torch.float32, device=device)
            name = str(args.model_dir) if args.model_dir else f"random {args.layers}x{args.hidden}"
        backend = FastBackend(model, tok, max_length=args.max_length, max_batch_tokens=args.max_batch_tokens, device=device, threads=args.threads)
        print(f"model {name} on {device}, max_batch_tokens={backend.max_batch_tokens}, ready in {time.perf_counter() - t0:.1f}s", flush=True)
        total = 0.0
        for task_id in args.tasks.split(","):
            n, full, secs = run_task(backend, task_id, args.limit)
            projected = secs * full / n
            total += projected
            print(f"{task_id:4s} {n:5d}/{full:5d} items  {secs:8.1f}s  projected {projected:8.1f}s", flush=True)
    load = f"load {' '.join(f'{x:.1f}' for x in load_before)} -> {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
    print(f"full_benchmark model={name} device={device} projected total {total:.0f}s ({total / 3600:.2f} h) | {load}")


if __name__ == "__main__":
    sys.exit(main())

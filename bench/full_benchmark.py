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

``--lmeval`` runs the same requests, task by task in the same process, through lm-eval
0.4.13's ``HFLM`` (``--model hf``: ``loglikelihood`` / ``generate_until``, batch size
``--batch-size``, float32) right after ours, and prints per task both times, both peak
memories (resident set, sampled every 10 ms while the task runs), the requests, the model
tokens (MC: distinct inputs for lm-eval, prefix-tree nodes for ours; generation: prompt plus
generated tokens), whether the answers agree, and both projected totals; peak memory is
the growth over the resident memory with both models loaded; ``--markdown``
prints the table for bench/README.md. On the real model (scripts/real_model.py):

    .venv/bin/python bench/full_benchmark.py --model-dir .real-model/plain --lmeval --limit 2 --max-new 32 --markdown
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
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


class PeakRSS:
    """The peak resident memory of this process while the block runs (a thread samples it every 10 ms);
    ``growth``: the peak less the resident memory at the start (both models are loaded by then)."""

    def __init__(self) -> None:
        import psutil

        self._process = psutil.Process()
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._process.memory_info().rss)
            self._stop.wait(0.01)

    @property
    def growth(self) -> int:
        return self.peak - self.start

    def __enter__(self) -> "PeakRSS":
        self.start = self.peak = self._process.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)


@dataclass
class TaskRequests:
    task_id: str
    n: int  # items scored
    full: int  # items of the paper's evaluation split
    mc: bool
    requests: list  # LLRequest (mc) or GenRequest
    items: list[list[int]] = field(default_factory=list)  # mc: the request indices of each item's choices


def task_requests(task_id: str, limit: int | None, max_new: int | None) -> TaskRequests:
    """Every prompt of the task over ``limit`` synthetic records of the paper's field lengths."""
    spec = get_task(task_id)
    full = data.eval_size(task_id)
    n = min(full, limit) if limit else full
    records = data.synthetic_records(task_id, n)
    if spec.output_type != "multiple_choice":
        new = min(spec.max_new_tokens, max_new or spec.max_new_tokens)
        gen = [GenRequest(ctx, tuple(spec.stop), new) for p in spec.prompts for ctx in data.gen_contexts(task_id, p.name, records)]
        return TaskRequests(task_id, n, full, False, gen)
    out = TaskRequests(task_id, n, full, True, [])
    for p in spec.prompts:
        for item in data.mc_items(task_id, p.name, records):
            start = len(out.requests)
            out.requests += item.requests()
            out.items.append(list(range(start, len(out.requests))))
    return out


def run_task(backend: FastBackend, task: TaskRequests) -> tuple[float, int, list]:
    """(seconds, peak resident bytes, answers: log-likelihoods or texts) of our backend on the task."""
    with PeakRSS() as mem:
        start = time.perf_counter()
        if task.mc:
            answers = [r.logprob for r in backend.loglikelihood(task.requests)]
        else:
            answers = backend.generate_until(task.requests)
        secs = time.perf_counter() - start
    return secs, mem.growth, answers


def run_lmeval_task(lm, task: TaskRequests) -> tuple[float, int, list]:
    """The same requests through lm-eval's HFLM (--model hf)."""
    from lm_eval.api.instance import Instance

    if task.mc:
        insts = [Instance("loglikelihood", {}, (r.context, r.continuation), i) for i, r in enumerate(task.requests)]
    else:
        insts = [Instance("generate_until", {}, (r.context, {"until": list(r.stop), "max_gen_toks": r.max_new_tokens, "do_sample": False}), i)
                 for i, r in enumerate(task.requests)]
    with PeakRSS() as mem:
        start = time.perf_counter()
        out = lm.loglikelihood(insts, disable_tqdm=True) if task.mc else lm.generate_until(insts, disable_tqdm=True)
        secs = time.perf_counter() - start
    return secs, mem.growth, [float(o[0]) for o in out] if task.mc else out


def task_model_tokens(backend: FastBackend, tok, task: TaskRequests, answers: list) -> tuple[int, int]:
    """Tokens through the model (lm-eval's, ours): MC as bench/mc_vs_lmeval.py counts them; a
    generation reads its prompt (left-truncated as both do) and writes its answer, on both sides."""
    if task.mc:
        from mc_vs_lmeval import model_tokens

        return model_tokens(backend, tok, task.requests)
    room = backend.max_length
    n = sum(min(len(tok.encode(r.context)), room - r.max_new_tokens) for r in task.requests) + sum(len(tok.encode(a, add_special_tokens=False)) for a in answers)
    return n, n


def agreement(task: TaskRequests, ours: list, theirs: list) -> str:
    """Same predictions (MC: argmax of each item's choices) or identical texts, as "k/n"."""
    if task.mc:
        same = sum(max(item, key=lambda i: ours[i]) == max(item, key=lambda i: theirs[i]) for item in task.items)
        return f"{same}/{len(task.items)}"
    return f"{sum(a == b for a, b in zip(ours, theirs))}/{len(ours)}"


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f}"


def load_text(before, after) -> str:
    return f"load {' '.join(f'{x:.1f}' for x in before)} -> {' '.join(f'{x:.1f}' for x in after)} on {os.cpu_count()} CPUs"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", type=Path, help="a saved checkpoint (default: a random-weight one)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--llama8b", action="store_true", help="random-weight Llama-3-8B shape (bf16 on CUDA)")
    ap.add_argument("--tasks", default=",".join(TASK_IDS))
    ap.add_argument("--limit", type=int, default=None, help="items per task; times are projected to the full split")
    ap.add_argument("--max-new", type=int, default=None, help="cap on the generative tasks' new tokens (default: the task's)")
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--max-batch-tokens", type=int, default=None, help="default: probed on CUDA, FastBackend's default elsewhere")
    ap.add_argument("--threads", type=int, default=None, help="torch threads on CPU (default: torch's)")
    ap.add_argument("--quick", action="store_true", help="3 items per task (a smoke run of a minute or two on CPU)")
    ap.add_argument("--lmeval", action="store_true", help="also run lm-eval's HFLM on the same requests (float32, --batch-size)")
    ap.add_argument("--batch-size", type=int, default=8, help="lm-eval's batch size (--lmeval)")
    ap.add_argument("--markdown", action="store_true", help="also print the per-task table as Markdown")
    args = ap.parse_args()
    if args.quick:
        args.limit = 3
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.lmeval and args.llama8b:
        ap.error("--lmeval loads the model from --model-dir (or the random tiny one), not --llama8b")
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
            dtype = torch.float32 if args.lmeval or device == "cpu" else torch.bfloat16
            model, tok = tiny.load(model_dir, dtype=dtype, device=device)
            name = str(args.model_dir) if args.model_dir else f"random {args.layers}x{args.hidden}"
        backend = FastBackend(model, tok, max_length=args.max_length, max_batch_tokens=args.max_batch_tokens, device=device, threads=args.threads)
        lm = None
        if args.lmeval:
            from lm_eval.models.huggingface import HFLM

            lm = HFLM(pretrained=str(model_dir), batch_size=args.batch_size, device=device, dtype="float32", max_length=args.max_length)
        import psutil

        rss = psutil.Process().memory_info().rss
        print(f"model {name} on {device}, max_batch_tokens={backend.max_batch_tokens}, ready in {time.perf_counter() - t0:.1f}s, "
              f"resident {mib(rss)} MiB (peaks below: growth over it)", flush=True)
        total = ref_total = 0.0
        rows = []
        for task_id in args.tasks.split(","):
            task = task_requests(task_id, args.limit, args.max_new)
            secs, peak, answers = run_task(backend, task)
            projected = secs * task.full / task.n
            total += projected
            line = f"{task_id:4s} {task.n:5d}/{task.full:5d} items {len(task.requests):5d} requests  ours {secs:7.1f}s (projected {projected:8.1f}s, peak +{mib(peak)} MiB)"
            if lm is not None:
                ref_secs, ref_peak, ref_answers = run_lmeval_task(lm, task)
                ref_projected = ref_secs * task.full / task.n
                ref_total += ref_projected
                tokens = task_model_tokens(backend, tok, task, answers)
                agree = agreement(task, answers, ref_answers)
                line += (f" | lm-eval {ref_secs:7.1f}s (projected {ref_projected:8.1f}s, peak +{mib(ref_peak)} MiB)"
                         f" | model tokens lm-eval/ours {tokens[0]}/{tokens[1]} | same answers {agree}")
                rows.append((task_id, task.n, task.full, len(task.requests), secs, ref_secs, peak, ref_peak, tokens, agree, projected, ref_projected))
            print(line, flush=True)
    load = load_text(load_before, os.getloadavg())
    summary = f"full_benchmark model={name} device={device} projected total {total:.0f}s ({total / 3600:.2f} h)"
    if lm is not None:
        summary += f", lm-eval HF {ref_total:.0f}s ({ref_total / 3600:.2f} h), speed-up {ref_total / total:.2f}x"
    print(f"{summary} | max_new {args.max_new or 'task default'} | threads {torch.get_num_threads()} | {load}")
    if args.markdown and rows:
        print("\n| task | items (paper) | requests | ours s | lm-eval s | peak growth MiB ours / lm-eval | model tokens lm-eval / ours | same answers | projected ours / lm-eval |")
        print("|---|---|---|---|---|---|---|---|---|")
        for t, n, full, reqs, s1, s2, p1, p2, (k1, k2), agree, pr1, pr2 in rows:
            print(f"| {t} | {n} ({full}) | {reqs} | {s1:.1f} | {s2:.1f} | {mib(p1)} / {mib(p2)} | {k1:,} / {k2:,} | {agree} | {pr1 / 60:.0f} / {pr2 / 60:.0f} min |")
        print(f"| **total** | | | {sum(r[4] for r in rows):.1f} | {sum(r[5] for r in rows):.1f} | | | | **{total / 3600:.2f} / {ref_total / 3600:.2f} h** |")


if __name__ == "__main__":
    sys.exit(main())

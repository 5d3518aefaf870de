"""The same multiple-choice and generation workload on --backend hf and vllm.

One line per backend: model loading, MC scoring and generation seconds, and each
phase's speed-up over hf measured in the same run. Every backend's log-likelihoods
are checked against hf's (1e-6*|LL| + 1e-5) and its generations for equality; exit
status 1 when one differs. Run it in the venv that has vLLM (docs/engines.md):

    VLLM_CPU_KVCACHE_SPACE=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 .venv-vllm/bin/python bench/engines.py
    .venv-vllm/bin/python bench/engines.py --layers 4 --hidden 256 --mc-items 200 --gen-items 32

MC: TE p1 (2 one-token choices), AT p1 (5 letters) and FAQ p1 (4 long answers) items.
Generation: NER p1 contexts, greedy, the task's stop strings, ``--max-new-tokens``.

``--mc-mix N``: scoring only, on the whole multiple-choice mix instead: the evaluator's own
requests (bench/work.py) of TE, SA, HS, FAQ, AT and WiC, every prompt p1-p6, zero-shot and
5-shot, the first N evaluation records of each task; every item's prediction (argmax over its
choices) is compared with the first backend's, and the load average is printed around the run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import data  # noqa: E402  (bench/ is on sys.path when run as a script)
import tiny  # noqa: E402
from evalita_data.registry import get_task  # noqa: E402
from evalita_eval.api import BackendOptions, GenRequest  # noqa: E402


def workload(args) -> tuple[list, list]:
    mc = []
    for task_id in ("te", "at", "faq"):
        for item in data.mc_items(task_id, "p1", data.synthetic_records(task_id, args.mc_items)):
            mc += item.requests()
    spec = get_task("ner")
    gen = [GenRequest(c, tuple(spec.stop), args.max_new_tokens) for c in data.gen_contexts("ner", "p1", data.synthetic_records("ner", args.gen_items))]
    return mc, gen


def mc_mix(limit: int) -> list:
    import work

    docs = work.benchmark_docs(None)
    return [r for k in work.FEWSHOT_K for r in work.limited_requests(docs, limit, MC_TASKS, k)]


def predictions(requests: list, lls: list) -> list[int]:
    """The argmax choice of each context (consecutive requests sharing a context are one item)."""
    out, start = [], 0
    for i in range(1, len(requests) + 1):
        if i == len(requests) or requests[i].context != requests[start].context:
            scores = [r.logprob for r in lls[start:i]]
            out.append(scores.index(max(scores)))
            start = i
    return out


def run_mc_mix(args, model_dir: Path) -> int:
    mc = mc_mix(args.mc_mix)
    print(f"model {args.layers}x{args.hidden}, MC mix {','.join(MC_TASKS)} p1-p6 0/5-shot, {args.mc_mix} records each: "
          f"{len(mc)} requests | load average {os.getloadavg()[0]:.1f}", flush=True)
    rows, ref, bad = {}, None, 0
    for name in args.backends.split(","):
        backend, t_load = timed(load, name, model_dir, args)
        lls, t_mc = timed(backend.loglikelihood, mc)
        preds = predictions(mc, lls)
        ref = ref or preds
        same = sum(a == b for a, b in zip(ref, preds))
        bad += same != len(ref)
        rows[name] = (t_load, t_mc, same, len(ref), os.getloadavg()[0])
        if hasattr(backend, "close"):
            backend.close()
    base = rows[args.backends.split(",")[0]][1]
    for name, (t_load, t_mc, same, n, load_after) in rows.items():
        print(f"{name:5s} load {t_load:6.1f} s | MC mix {t_mc:7.2f} s ({base / t_mc:5.2f}x) | same predictions {same}/{n} | load average after {load_after:.1f}")
    return 1 if bad else 0


MC_TASKS = ("te", "sa", "hs", "faq", "at", "wic")


def load(name: str, model_dir: Path, args):
    from evalita_eval.backends import create_backend

    if name.startswith("vllm"):
        # "vllm" (the default plan, prefill) or "vllm:MODE" (vllm_scoring.MODES)
        extra = {"vllm_engine_args": {"enforce_eager": True}, "vllm_loglikelihood": name.partition(":")[2] or "prefill"}
        return create_backend("vllm", BackendOptions(model=str(model_dir), dtype="float32", extra=extra))
    return create_backend("hf", BackendOptions(model=str(model_dir), dtype="float32", batch_size=args.batch_size))


def timed(fn, *a):
    start = time.perf_counter()
    out = fn(*a)
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64, help="head size 32: hidden/32 heads (vLLM's CPU attention needs >= 32)")
    parser.add_argument("--mc-items", type=int, default=100, help="items of each MC task")
    parser.add_argument("--gen-items", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8, help="hf backend")
    parser.add_argument("--mc-mix", type=int, default=0, metavar="N", help="scoring only: the whole MC mix, N records per task")
    parser.add_argument("--backends", default="hf,vllm", help="also vllm:prefix, vllm:prompt_logprobs (one vLLM engine per process: list it alone)")
    args = parser.parse_args()

    model_dir = tiny.build_tiny_model(Path(tempfile.mkdtemp(prefix="bench-engines-")) / "model", layers=args.layers, hidden=args.hidden)
    if args.mc_mix:
        sys.exit(run_mc_mix(args, model_dir))
    mc, gen = workload(args)
    print(f"model {args.layers}x{args.hidden}, {len(mc)} MC requests, {len(gen)} generations of <= {args.max_new_tokens} tokens", flush=True)
    rows, ref, bad = {}, None, 0
    for name in args.backends.split(","):
        backend, t_load = timed(load, name, model_dir, args)
        lls, t_mc = timed(backend.loglikelihood, mc)
        gens, t_gen = timed(backend.generate_until, gen)
        if ref is None:
            ref = (lls, gens)
        worst = max(abs(a.logprob - b.logprob) / (1e-6 * abs(a.logprob) + 1e-5) for a, b in zip(ref[0], lls))
        same_gen = gens == ref[1]
        bad += worst > 1 or not same_gen or [r.is_greedy for r in lls] != [r.is_greedy for r in ref[0]]
        rows[name] = (t_load, t_mc, t_gen, worst, same_gen)
        if hasattr(backend, "close"):
            backend.close()
    base = rows[args.backends.split(",")[0]]
    for name, (t_load, t_mc, t_gen, worst, same_gen) in rows.items():
        print(f"{name:5s} load {t_load:6.1f} s | MC {t_mc:7.2f} s ({base[1] / t_mc:5.2f}x) | generation {t_gen:7.2f} s ({base[2] / t_gen:5.2f}x) "
              f"| MC+gen {t_mc + t_gen:7.2f} s ({(base[1] + base[2]) / (t_mc + t_gen):5.2f}x) | worst dLL {worst:.2f} of the bound | same generations: {same_gen}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

"""Multiple-choice scoring: FastBackend vs lm-evaluation-harness ``--model hf``, same run, same machine.

Builds a random-weight Llama-shaped model (``--layers``/``--hidden``) and the bench data
(TE, FAQ, AT; all six prompts by default), then scores the same requests with our
FastBackend and with ``lm_eval.simple_evaluate(model="hf")`` at the same batch size, and
prints one line: wall times, requests/s, the speed-up, and the largest difference
between the two log-likelihoods (with the bound 1e-6*|LL| + 1e-5).

    .venv/bin/python bench/mc_vs_lmeval.py                        # tiny model, 2 x 64
    .venv/bin/python bench/mc_vs_lmeval.py --layers 8 --hidden 512

Wall times include everything after the imports: loading the model, building the
requests (ours) or indexing the tasks and loading the datasets (lm-eval), and scoring.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import data  # noqa: E402  (bench/ is on sys.path when run as a script)
import tiny  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402
from evalita_data.registry import get_task  # noqa: E402
from evalita_data.taskspec import MCPrompt  # noqa: E402
from evalita_eval.fast import FastBackend  # noqa: E402

PROMPTS = ["p1", "p2", "p3", "p4", "p5", "p6"]


def lmeval_yaml(task_id: str, prompt: MCPrompt, data_file: Path) -> dict:
    spec = get_task(task_id)
    choices = prompt.choices if isinstance(prompt.choices, list) else "{{" + prompt.choices + "}}"
    return {
        "task": f"bench_{task_id}_{prompt.name}",
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data_file)}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": prompt.template,
        "doc_to_choice": choices,
        "doc_to_target": "{{" + spec.target + "}}",
        "metric_list": [{"metric": "acc"}],
    }


def run_ours(model_dir: Path, records: dict, pairs: list[tuple[str, str]], args) -> tuple[float, float, dict]:
    t0 = time.perf_counter()
    model, tok = tiny.load(model_dir, device=args.device)
    requests = []
    args.items = []  # the (context, continuation) keys of each item's choices: its prediction is their argmax
    for task_id, p in pairs:
        for item in data.mc_items(task_id, p, records[task_id]):
            requests += item.requests()
            args.items.append([(r.context, r.continuation) for r in item.requests()])
    backend = FastBackend(model, tok, max_length=args.max_length, max_batch_tokens=args.max_batch_tokens)
    t1 = time.perf_counter()
    results = backend.loglikelihood(requests)
    t2 = time.perf_counter()
    args.work = model_tokens(backend, tok, requests)
    return t2 - t0, t2 - t1, {(r.context, r.continuation): res.logprob for r, res in zip(requests, results)}


def model_tokens(backend: FastBackend, tok, requests) -> tuple[int, int]:
    """Tokens through the model: (lm-eval's, ours). The ceiling of a scoring speed-up at equal
    per-token speed. lm-eval runs every distinct input (context + continuation minus its last
    token) once: one-token choices of a context share it; ours runs each prefix-tree node once."""
    from evalita_eval.fast.encode import encode_requests
    from evalita_eval.fast.tree import pack_trees

    seqs = [tuple((c + x)[-(backend.max_length + 1):][:-1]) for c, x in encode_requests(tok, requests)]
    return sum(map(len, set(seqs))), sum(len(t) for t in pack_trees(seqs, backend.max_tree_tokens))


def run_lmeval(model_dir: Path, task_names: list[str], yaml_dir: Path, args, batch_size: int | None = None) -> tuple[float, float, dict]:
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    scoring = [0.0]
    original = HFLM.loglikelihood

    def timed(self, requests, *a, **kw):
        s = time.perf_counter()
        try:
            return original(self, requests, *a, **kw)
        finally:
            scoring[0] += time.perf_counter() - s

    HFLM.loglikelihood = timed
    try:
        t0 = time.perf_counter()
        out = lm_eval.simple_evaluate(
            model="hf",
            model_args=f"pretrained={model_dir},dtype=float32,max_length={args.max_length}",
            tasks=task_names,
            batch_size=batch_size or args.batch_size,
            device=args.device,
            task_manager=TaskManager(include_path=str(yaml_dir)),
            log_samples=True,
            limit=None,
        )
        total = time.perf_counter() - t0
    finally:
        HFLM.loglikelihood = original
    lls = {}
    for samples in out["samples"].values():
        for s in samples:
            for args_, resp in zip(s["arguments"].values() if isinstance(s["arguments"], dict) else s["arguments"], s["resps"]):
                ctx, cont = (args_["arg_0"], args_["arg_1"]) if isinstance(args_, dict) else args_
                lls[(ctx, cont)] = float(resp[0][0])
    return total, scoring[0], lls


def compete() -> subprocess.Popen:
    """A CPU-bound process (a Python busy loop) competing for the cores; killed by its pid at the end."""
    import subprocess

    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", type=Path, help="a saved checkpoint; default: build a random-weight one")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--tasks", default="te,faq,at")
    ap.add_argument("--prompts", default=",".join(PROMPTS))
    ap.add_argument("--only", default=None, help="task:prompt pairs instead of tasks x prompts, e.g. te:p1,te:p3,faq:p1")
    ap.add_argument("--batch-size", type=int, default=8, help="lm-eval batch size")
    ap.add_argument("--max-batch-tokens", type=int, default=None, help="our token budget (default: FastBackend's)")
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--limit", type=int, default=None, help="items per task (default: all)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each side; medians are reported")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="both sides (default: cuda if available)")
    ap.add_argument("--json", type=Path, help="also write the measurements here")
    ap.add_argument("--lmeval-b1", action="store_true", help="also run lm-eval at batch size 1 and report its batch-1 vs batch-N difference")
    ap.add_argument("--compete", action="store_true", help="run a CPU-bound competing process during both sides")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    competitor = compete() if args.compete else None
    if args.only:
        pairs = [tuple(x.split(":")) for x in args.only.split(",")]
    else:
        pairs = [(t, p) for t in args.tasks.split(",") for p in args.prompts.split(",")]
    tasks = list(dict.fromkeys(t for t, _ in pairs))

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model_dir = args.model_dir or tiny.build_tiny_model(tmp / "model", layers=args.layers, hidden=args.hidden)
        records, names = {}, []
        yaml_dir = tmp / "tasks"
        yaml_dir.mkdir()
        for t in tasks:
            recs = data.BUILDERS[t]()[: args.limit]
            path = tmp / f"{t}.jsonl"
            data.write_jsonl(path, recs)
            records[t] = recs
            for p in (p for task, p in pairs if task == t):
                cfg = lmeval_yaml(t, get_task(t).prompt(p), path)
                (yaml_dir / f"{cfg['task']}.yaml").write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
                names.append(cfg["task"])

        ours, theirs = [], []
        try:
            for _ in range(args.repeat):
                ours.append(run_ours(model_dir, records, pairs, args))
                theirs.append(run_lmeval(model_dir, names, yaml_dir, args))
        finally:
            if competitor is not None:
                competitor.kill()
                competitor.wait()
        # lm-eval's own batch-1 vs batch-N difference: what float rounding alone moves there.
        b1 = run_lmeval(model_dir, names, yaml_dir, args, batch_size=1)[2] if args.lmeval_b1 else None
    load_after = os.getloadavg()

    n = len(ours[0][2])
    our_ll, ref_ll = ours[0][2], theirs[0][2]
    missing = [k for k in our_ll if k not in ref_ll]
    deltas = [(abs(our_ll[k] - ref_ll[k]), 1e-6 * abs(ref_ll[k]) + 1e-5) for k in our_ll if k in ref_ll]
    max_delta = max(d for d, _ in deltas)
    outside = sum(d > bound for d, bound in deltas)
    worst = max(deltas, key=lambda x: x[0] / x[1])
    within = not outside and not missing

    def predictions(ll: dict) -> list[int]:
        return [max(range(len(keys)), key=lambda j: ll[keys[j]]) for keys in args.items if all(k in ll for k in keys)]

    same_pred = sum(a == b for a, b in zip(predictions(our_ll), predictions(ref_ll)))
    b1_delta = max(abs(b1[k] - ref_ll[k]) for k in ref_ll if k in b1) if b1 else None
    our_wall, our_score = statistics.median(o[0] for o in ours), statistics.median(o[1] for o in ours)
    ref_wall, ref_score = statistics.median(t[0] for t in theirs), statistics.median(t[1] for t in theirs)
    m = {
        "model": f"{args.layers}x{args.hidden}" if not args.model_dir else str(args.model_dir),
        "pairs": [f"{t}:{p}" for t, p in pairs], "requests": n, "batch_size": args.batch_size,
        "ours_wall_s": our_wall, "ours_scoring_s": our_score, "lmeval_wall_s": ref_wall, "lmeval_scoring_s": ref_score,
        "speedup_wall": ref_wall / our_wall, "speedup_scoring": ref_score / our_score,
        "max_abs_delta_ll": max_delta, "within_bound": within, "outside_bound": outside,
        "worst_delta_over_bound": worst[0] / worst[1], "unmatched_requests": len(missing),
        "model_tokens_lmeval": args.work[0], "model_tokens_ours": args.work[1],
        "predictions_identical": same_pred, "items": len(args.items), "lmeval_b1_vs_bN_max_abs_delta_ll": b1_delta,
        "threads": torch.get_num_threads(), "compete": args.compete, "load_before": load_before, "load_after": load_after,
    }
    if args.json:
        args.json.write_text(json.dumps(m, indent=1))
    print(
        f"mc_vs_lmeval model={m['model']} requests={n} | ours {our_wall:.1f}s wall ({n / our_wall:.0f} req/s), "
        f"{our_score:.1f}s scoring | lm-eval {ref_wall:.1f}s wall ({n / ref_wall:.0f} req/s), {ref_score:.1f}s scoring | "
        f"speed-up {m['speedup_wall']:.2f}x wall, {m['speedup_scoring']:.2f}x scoring | "
        f"max|dLL| {max_delta:.2e}, worst dLL/bound {worst[0] / worst[1]:.2f}, "
        f"{'all within' if within else f'{outside} outside'} 1e-6*|LL|+1e-5"
        + (f"; lm-eval's own batch 1 vs {args.batch_size}: max|dLL| {b1_delta:.2e}" if b1 else "")
        + f" | predictions identical {same_pred}/{len(args.items)}"
        + (f" ({len(missing)} requests unmatched)" if missing else "")
        + f" | model tokens lm-eval/ours {args.work[0] / args.work[1]:.2f}x ({args.work[0]}/{args.work[1]})"
        + f" | threads {torch.get_num_threads()}{', with a competing process' if args.compete else ''}"
        + f" | load {' '.join(f'{x:.1f}' for x in load_before)} -> {' '.join(f'{x:.1f}' for x in load_after)} on {os.cpu_count()} CPUs"
    )
    # Against lm-eval's padded batches the bound is not the test (their own batch sizes differ
    # by as much): identical predictions are; the plain-reference bound is tested in tests/.
    sys.exit(0 if same_pred == len(args.items) and not missing else 1)


if __name__ == "__main__":
    main()

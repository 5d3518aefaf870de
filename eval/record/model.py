"""The run record: one typed ``RunRecord`` the runner builds and writes by serialising it (``to_json``), and the one
reader (record/read.py) returns once checked; its comparability is derived, never believed (docs/run-record.md)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

FORMAT_VERSION = 2  # results.json ``format_version`` written by the runner (record/migrate.py reads older ones)

Scores = dict[str, float]  # metric -> value (fraction), plus "n" and, where counted, "unparsed" (ints)
OPTIONAL = {"optional": True}  # a field left out of the document while it is None
INTERNAL = {"internal": True}  # a field of the record that is no key of its document (derived, or where it was read)


def opt() -> Any:
    return field(default=None, metadata=OPTIONAL)


def plain(value: Any) -> Any:
    """``value`` as JSON: a record's dataclasses as objects of their document keys (optional ones only when set)."""
    if is_dataclass(value):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value) if not f.metadata.get("internal")
                and not (f.metadata.get("optional") and getattr(value, f.name) is None)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def finished_text(planned: list[str] | None, skipped: list[str], results: dict) -> str:
    """'N of M tasks finished' of a partial run."""
    if not planned:
        return f"{len(results)} task(s) finished, of a number the file does not record"
    return f"{len(results)} of {len([t for t in planned if t not in set(skipped)])} tasks finished"


@dataclass(frozen=True)
class RecordedMetric:
    name: str
    kind: str  # HITS or CORPUS (evalita_data.scoring.metric)
    higher_is_better: bool


@dataclass
class ModelRecord:
    """results.json ``model``: the backend's ``cache_identity()`` (each key a field), the name outputs use, the cache
    key."""

    name_or_path: str
    name: str | None = opt()  # --model-name (naming.py): how outputs name the model
    revision: str | None = None
    commit: str | None = opt()  # a Hub model's snapshot commit
    dtype: str | None = None
    backend: str | None = None
    local_folder: bool | None = opt()  # published: named by its folder (publishing/public.py)
    files_sha256: str | None = opt()
    file_sha256: str | None = opt()  # a GGUF file's fingerprint
    gguf_file: str | None = opt()
    gguf_sha256: str | None = opt()
    tokenizer: str | None = opt()  # a tokenizer given apart from the model (published: its folder's name)
    tokenizer_files_sha256: str | None = opt()
    chat_template_sha256: str | None = opt()
    trust_remote_code: bool | None = opt()
    max_length: int | None = opt()
    device: str | None = opt()
    base_url: str | None = opt()  # a server's (openai-* backends)
    served_model: str | None = opt()
    options: dict[str, Any] = field(default_factory=dict)  # the backend's Options that change numbers
    resolved: dict[str, Any] | None = opt()  # what a backend of another package resolved, under its own keys
    backend_args: dict[str, Any] | None = opt()  # every --backend-arg of a backend without Options
    model_args: dict[str, Any] | None = opt()  # a run read from lm-eval: its --model_args
    cache_key: str | None = opt()  # the model part of the resume cache's key
    num_parameters: int | None = opt()  # where the backend counts them (not in the identity)


@dataclass
class ChatTemplate:
    source: str | None = None  # "tokenizer" or "server"
    sha256: str | None = None


@dataclass
class ConfigRecord:
    """results.json ``config``: the run's options as given (its ``RunSpec``)."""

    num_fewshot: int | None = None
    limit: int | float | None = None  # a float: lm-eval's share of the items
    batch_size: int | str | None = None  # "auto", or the size given
    max_memory: int | None = None  # bytes (RunSpec parses "4GiB")
    apply_chat_template: bool = False
    seed: int | None = None
    device: str | None = None
    max_new_tokens: int | None = None
    setting: str = "loglikelihood"
    constrained: bool = False
    system_instruction: str | None = None
    fewshot_as_multiturn: bool | None = None
    chat_template: ChatTemplate | None = None
    split: str | None = None
    thinking: bool = False  # --thinking on (docs/settings.md, reasoning models): its markers and trace budget
    think_markers: list[str] | None = opt()
    max_thinking_tokens: int | None = opt()
    trace_budget: int | None = opt()
    bertscore: dict[str, Any] | None = opt()  # the scorer of bertscore_f1 (running/bertscore.py)
    replicas: int | None = opt()  # data-parallel replicas (eval/replicas): no number changes
    gen_kwargs: dict[str, Any] | None = opt()  # a run read from lm-eval: its --gen_kwargs
    prompts: list[str] | None = field(default=None, metadata=INTERNAL)  # --prompts, from the identity (None: all)


@dataclass
class DataRecord:
    source: str | None = None
    local_folder: bool | None = opt()  # published: a local folder named by its name
    manifest_sha256: dict[str, Any] = field(default_factory=dict)
    revisions: dict[str, str | None] = field(default_factory=dict)  # the official Hub source: dataset revisions


@dataclass
class TaskRecord:
    """results.json ``task_versions[task]``: what the run scored the task with."""

    version: Any = None
    prompts: dict[str, str] = field(default_factory=dict)  # prompt -> hash of its definition
    metrics: list[RecordedMetric] | None = opt()  # None: not recorded (an older file)
    # The paper's generation budget (None: the task does not generate); recorded since format 1.
    max_new_tokens: int | None = None
    budget_recorded: bool = field(default=True, metadata=INTERNAL)  # False: an older file without max_new_tokens


@dataclass
class Timing:
    wall_s: float | None = opt()
    compute_s: float | None = opt()
    requests: float | None = opt()
    computed: float | None = opt()
    cached: float | None = opt()


@dataclass(frozen=True)
class Asked:
    """results.json ``asked[task]``: how the task was asked (EEE's generation_config)."""

    request: str  # "loglikelihood" or "generate_until"
    max_new_tokens: int | None = opt()
    until: tuple[str, ...] | None = opt()


@dataclass(frozen=True)
class TraceSummary:
    """results.json ``reasoning[task][prompt]`` (--thinking on): the prompt's reasoning traces."""

    traces: int
    forced: int
    unfinished: int
    mean_trace_tokens: float | None = None  # None: no trace's length was counted


@dataclass
class SourceTool:
    """results.json ``source_tool``: a run read from another tool's output (an lm-eval folder)."""

    name: str
    version: str | None = None
    results_file: str | None = None
    notes: list[str] = field(default_factory=list)
    group_acc: float | None = None
    not_comparable_with_paper: list[str] = field(default_factory=list)  # what its reader saw that the config cannot


@dataclass(frozen=True)
class SampleLine:
    """One checked line of ``samples/<task>_<prompt>.jsonl`` (sample.schema.json): what reports, ``compare`` and
    ``export-eee`` read of it; ``line`` is the whole line for the scoring functions, which read samples as dicts."""

    line: dict[str, Any] = field(repr=False, compare=False)
    run_id: str | None
    doc_id: int
    prompt: str | None = None
    choices: list | None = None  # multiple choice: the choices' texts
    loglikelihoods: list[float] | None = None
    is_greedy: list[bool] | None = None
    generation: str | None = None
    prediction: Any = None  # the choice's index, or the generated answer
    gold: Any = None
    reference: Any = None  # a generative task's reference answer (its gold text)
    parsed_by: str | None = None

    @classmethod
    def of(cls, line: dict[str, Any]) -> "SampleLine":
        return cls(line=line, **{k: line[k] for k in cls.__dataclass_fields__ if k != "line" and k in line})

    @property
    def multiple_choice(self) -> bool:
        """A scored choice: the prediction is an index into the choices."""
        return self.choices is not None and isinstance(self.prediction, int) and not isinstance(self.prediction, bool)

    @property
    def has_gold(self) -> bool:
        return "gold" in self.line

    @property
    def target(self) -> Any:
        """What the answer is checked against: the reference text, else the gold."""
        return self.reference if "reference" in self.line else self.gold


@dataclass
class RunRecord:
    """One run: its results.json (``path``) and its samples, checked; built by the runner as it runs."""

    path: Path
    status: str  # "partial" until every task is finished; "complete", or "empty" when none was evaluated
    run_id: str | None
    identity: dict[str, Any] | None  # results.json ``run_identity``: the inputs the run id hashes (None: an older file)
    model: ModelRecord
    config: ConfigRecord
    data: DataRecord
    format_version: int = FORMAT_VERSION  # the version of the file read (its document is migrated to the current one)
    results: dict[str, dict[str, Scores]] = field(default_factory=dict)  # task -> prompt -> scores
    task_versions: dict[str, TaskRecord] = field(default_factory=dict)
    timing: dict[str, Timing] = field(default_factory=dict)
    planned: list[str] | None = None  # tasks.planned (None: not recorded)
    skipped_tasks: list[str] = field(default_factory=list)  # tasks.skipped: planned, but their split is missing
    skipped: dict[str, str] = field(default_factory=dict)  # task -> why it was not evaluated
    parsed_by: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # task -> prompt -> rule -> count
    reasoning: dict[str, dict[str, TraceSummary]] = field(default_factory=dict)  # task -> prompt -> traces (thinking)
    unparsed_flags: dict[str, Any] = field(default_factory=dict)  # prompts with >= 10 % unparsed answers (issue 28)
    baselines: dict[str, dict[str, Any]] = field(default_factory=dict)
    package_versions: dict[str, str] = field(default_factory=dict)
    resources: dict[str, dict[str, float]] = field(default_factory=dict)  # task -> peak memory (MiB)
    asked: dict[str, Asked] = field(default_factory=dict)  # task -> how it was asked (none recorded: an older run)
    task_config: dict[str, dict[str, bool]] | None = None  # --constrained: the tasks it applies to
    source_tool: SourceTool | None = None  # a run read from another tool's output
    notes: list[str] = field(default_factory=list)  # what the reader found and said (a hand-edited flag)
    samples: dict[tuple[str, str], list[dict]] = field(default_factory=dict)  # (task, prompt) -> checked lines
    sample_sources: dict[tuple[str, str], Path] = field(default_factory=dict)  # read from another tool's files
    display: str = ""
    origin: Path | None = None  # the folder it was read from when not a results.json (an lm-eval output folder)

    @property
    def not_comparable_reasons(self) -> list[str]:
        """Why the run is not the paper's evaluation, derived from the recorded config (record/comparable.py)."""
        from .comparable import not_comparable_reasons

        return not_comparable_reasons(self)

    @property
    def comparable_with_paper(self) -> bool:
        return not self.not_comparable_reasons

    @property
    def partial(self) -> bool:
        return self.status != "complete"

    @property
    def status_text(self) -> str:
        """'complete', or 'partial run: N of M tasks finished'."""
        if not self.partial:
            return "complete"
        return f"partial run: {finished_text(self.planned, self.skipped_tasks, self.results)}"

    def to_json(self) -> dict[str, Any]:
        """The results.json of the record, in the current format: the only document ever written as results.json."""
        from .comparable import NOT_COMPARABLE_KEY

        reasons = self.not_comparable_reasons
        doc = {
            "format_version": FORMAT_VERSION, "status": self.status, "run_identity": self.identity,
            "run_id": self.run_id, "tasks": {"planned": self.planned, "skipped": self.skipped_tasks},
            "model": plain(self.model), "data": plain(self.data), "config": plain(self.config),
            "comparable_with_paper": not reasons, NOT_COMPARABLE_KEY: reasons, "results": self.results,
            "task_versions": plain(self.task_versions), "parsed_by": self.parsed_by, "reasoning": plain(self.reasoning),
            "unparsed_flags": self.unparsed_flags, "baselines": self.baselines, "skipped": self.skipped,
            "versions": self.package_versions, "timing": plain(self.timing), "resources": self.resources,
            "asked": plain(self.asked), "task_config": self.task_config, "source_tool": plain(self.source_tool),
        }
        if self.planned is None:
            del doc["tasks"]
        return {k: v for k, v in doc.items() if k not in ("reasoning", "task_config", "source_tool") or v}

    def samples_path(self, task: str, prompt: str) -> Path:
        """The samples file of a prompt (a run read from another tool: the file its samples were read from)."""
        if self.sample_sources:
            return self.sample_sources.get((task, prompt)) or self.path.parent / f"samples_*{task}*{prompt}*.jsonl"
        return self.path.parent / "samples" / f"{task}_{prompt}.jsonl"

    def sample_lines(self, task: str, prompt: str) -> list[SampleLine] | None:
        """The checked lines of a prompt's samples file as ``SampleLine``s; None where the run has no such file."""
        lines = self.samples.get((task, prompt))
        return None if lines is None else [SampleLine.of(line) for line in lines]

"""The typed run record: what ``read_run`` (record/read.py) returns once a results.json and its
samples have passed the schema and the checks JSON Schema cannot express (docs/run-record.md).

Everything reports, ``compare``, ``push-results`` and ``export-eee`` read of a run is an attribute
here; ``raw`` keeps the whole (migrated) document for what is copied through unread (publishing).
``comparable_with_paper`` and its reasons are derived from the recorded config when the record is
read (record/comparable.py), never taken from the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1  # results.json ``format_version`` written by the runner (record/migrate.py reads older ones)

Scores = dict[str, float]  # metric -> value (fraction), plus "n" and, where counted, "unparsed" (ints)


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
    name_or_path: str
    name: str | None = None  # --model-name (naming.py): how outputs name the model
    revision: str | None = None
    dtype: str | None = None
    backend: str | None = None
    local_folder: bool = False
    files_sha256: str | None = None
    file_sha256: str | None = None  # a GGUF file's fingerprint
    tokenizer: str | None = None  # a tokenizer given apart from the model (published: its folder's name)
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChatTemplate:
    source: str | None = None  # "tokenizer" or "server"
    sha256: str | None = None


@dataclass
class ConfigRecord:
    num_fewshot: int | None = None
    limit: int | None = None
    split: str | None = None
    setting: str = "loglikelihood"
    constrained: bool = False
    system_instruction: str | None = None
    apply_chat_template: bool = False
    chat_template: ChatTemplate | None = None
    fewshot_as_multiturn: bool | None = None
    max_new_tokens: int | None = None
    seed: int | None = None
    device: str | None = None
    prompts: list[str] | None = None  # --prompts as the run identity records it (None: every prompt)
    thinking: bool = False  # --thinking on (docs/settings.md, reasoning models)


@dataclass
class DataRecord:
    source: str | None = None
    local_folder: bool = False
    manifest_sha256: dict[str, Any] = field(default_factory=dict)
    revisions: dict[str, str | None] = field(default_factory=dict)


@dataclass
class TaskRecord:
    """results.json ``task_versions[task]``: what the run scored the task with."""

    version: Any = None
    prompts: dict[str, str] = field(default_factory=dict)  # prompt -> hash of its definition
    metrics: list[RecordedMetric] | None = None  # None: not recorded (an older file)
    budget_recorded: bool = False  # whether ``max_new_tokens`` was recorded (format 1)
    max_new_tokens: int | None = None  # the paper's generation budget of the task (None: it does not generate)


@dataclass
class Timing:
    wall_s: float | None = None
    compute_s: float | None = None
    requests: float | None = None
    computed: float | None = None
    cached: float | None = None


@dataclass(frozen=True)
class Asked:
    """results.json ``asked[task]``: how the task was asked (EEE's generation_config)."""

    request: str  # "loglikelihood" or "generate_until"
    max_new_tokens: int | None = None
    until: tuple[str, ...] = ()


@dataclass(frozen=True)
class TraceSummary:
    """results.json ``reasoning[task][prompt]`` (--thinking on): the prompt's reasoning traces."""

    traces: int
    forced: int
    unfinished: int
    mean_trace_tokens: float | None = None  # None: no trace's length was counted


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
    """One run: its results.json (``path``) and its samples, checked."""

    path: Path
    format_version: int
    status: str
    run_id: str | None
    identity: dict[str, Any] | None  # results.json ``run_identity``: the inputs the run id hashes (None: an older file)
    model: ModelRecord
    config: ConfigRecord
    data: DataRecord
    results: dict[str, dict[str, Scores]]  # task -> prompt -> scores
    task_versions: dict[str, TaskRecord]
    timing: dict[str, Timing]
    planned: list[str] | None  # tasks.planned (None: not recorded)
    skipped_tasks: list[str]
    parsed_by: dict[str, dict[str, dict[str, int]]]  # task -> prompt -> rule -> count
    baselines: dict[str, dict[str, Any]]
    package_versions: dict[str, str]
    not_comparable_reasons: list[str]  # derived from the config (record/comparable.py)
    notes: list[str] = field(default_factory=list)  # what the reader found and said (a hand-edited flag)
    asked: dict[str, Asked] = field(default_factory=dict)  # task -> how it was asked (None recorded: an older run)
    reasoning: dict[str, dict[str, TraceSummary]] = field(default_factory=dict)  # task -> prompt -> traces (--thinking on)
    raw: dict = field(default_factory=dict)  # the whole migrated document
    samples: dict[tuple[str, str], list[dict]] = field(default_factory=dict)  # (task, prompt) -> checked lines
    display: str = ""
    origin: Path | None = None  # the folder it was read from when not a results.json (an lm-eval output folder)

    @property
    def comparable_with_paper(self) -> bool:
        return not self.not_comparable_reasons

    @property
    def partial(self) -> bool:
        return self.status != "complete"

    @property
    def status_text(self) -> str:
        """'complete', or 'partial run: N of M tasks finished'."""
        return "complete" if not self.partial else f"partial run: {finished_text(self.planned, self.skipped_tasks, self.results)}"

    @property
    def source_tool(self) -> dict | None:
        tool = self.raw.get("source_tool")
        return tool if isinstance(tool, dict) else None

    def samples_path(self, task: str, prompt: str) -> Path:
        return self.path.parent / "samples" / f"{task}_{prompt}.jsonl"

    def samples_of(self, task: str, prompt: str) -> list[dict] | None:
        """The checked lines of ``samples/<task>_<prompt>.jsonl``; None where the run has no such file."""
        return self.samples.get((task, prompt))

    def sample_lines(self, task: str, prompt: str) -> list[SampleLine] | None:
        """The checked lines of ``samples/<task>_<prompt>.jsonl`` as typed ``SampleLine``s; None where the run has no such file."""
        lines = self.samples.get((task, prompt))
        return None if lines is None else [SampleLine.of(line) for line in lines]

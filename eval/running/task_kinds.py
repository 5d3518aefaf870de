"""One object per kind of task a run asks (docs/evaluator.md), owning what differs between them: ``ScoredChoice``
(multiple choice scored by log-likelihood), ``InstructChoice`` (multiple choice asked in an instruct setting,
docs/settings.md, answered by generation and parsed), ``Generation`` (NER, REL, LS, SUM...). ``task_kind`` is the one
place that tells them apart; everything else asks the object, never ``output_type`` or the setting.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Callable, Sequence

from evalita_data.scoring.metrics import mc_prediction

from ..api import GenRequest, LLRequest, RequestKind, check_ll_result, cut_at_stop
from ..metrics import BERTSCORE_F1, SETTING_METRICS, format_failures
from .bertscore import bertscore_f1
from ..settings import instruct as st
from ..settings.constrained import choice_constraint, task_constraint
from ..settings import thinking as th
from ..reporting.baselines import generative_baselines, task_baselines
from ..sources.entries import TaskEntry

LOGLIKELIHOOD_SETTING = "loglikelihood"  # the setting that scores each choice (by requests of that kind)
Turns = Sequence["tuple[dict, ...] | None"]


class TaskKind:
    """What every kind shares; ``request_kind`` is also the name of the backend method called."""

    request_kind = RequestKind.GENERATE  # what it asks the backend (Capabilities.serves says whether it can)

    def __init__(self, entry: TaskEntry, setting: str, constrained: bool = False, max_new_tokens: int | None = None,
                 thinking: th.Thinking = th.Thinking(), count_tokens: Callable[[str], int] | None = None) -> None:
        self.entry, self.spec, self.setting = entry, entry.spec, setting
        self._constrained, self._max_new_override = constrained, max_new_tokens
        self.thinking, self.count_tokens = thinking, count_tokens
        self.bertscore_model: str | None = None  # --bertscore-model (running/bertscore.py)

    @cached_property
    def task(self) -> Any:
        """The compiled task as asked (its prompts, choices and targets)."""
        return self.entry.compiled

    @property
    def askable(self) -> bool:
        return True

    @property
    def budget(self) -> int | None:
        """The paper's generation budget of one request; None when the kind generates nothing."""
        return self.spec.max_new_tokens

    @property
    def stops(self) -> tuple[str, ...]:
        """The stop strings of its generations (none when it generates nothing)."""
        return tuple(self.spec.stop) if self.request_kind is RequestKind.GENERATE else ()

    @property
    def sent_stops(self) -> tuple[str, ...]:
        """The stop strings its requests carry: none when thinking without forcing (``gen_request``: the answer is cut
        at ``stops`` once split from its trace)."""
        return () if self.thinking.on and not self.forcing else self.stops

    @property
    def forcing(self) -> bool:
        """Whether the trace is generated first and closed at --max-thinking-tokens (running/thinking_run.py)."""
        return self.thinking.on and self.thinking.max_tokens is not None

    @property
    def max_new_tokens(self) -> int:
        """The generation limit of the requests: the answer's (--max-new-tokens, else the budget), plus the trace's
        default budget when thinking without --max-thinking-tokens (the trace then forced apart, with the answer's)."""
        answer: int = self._max_new_override or self.budget  # type: ignore[assignment]
        return answer + (th.DEFAULT_TRACE_BUDGET if self.thinking.on and not self.forcing else 0)

    def gen_request(self, context: str, stop: Sequence[str], constraint: Any, turns: Any) -> GenRequest:
        """One generation request. Thinking: the markers ride on it, and without forcing neither stop strings (the
        trace's own blank lines must not end it: the answer is cut at them once split) nor a constraint (it would forbid
        the trace; --constrained applies to the forced answer)."""
        free = self.thinking.on and not self.forcing
        return GenRequest(context, () if free else tuple(stop), self.max_new_tokens, None if free else constraint,
                          turns, self.thinking.markers if self.thinking.on else None)

    def answer_of(self, context: str, generation: str, stop: Sequence[str]) -> tuple[str, dict[str, Any]]:
        """The answer the rules and metrics read (the reply after its trace, cut at the stop strings), and the sample's
        trace fields (none when the reply has no trace and thinking is off)."""
        trace = th.split_trace(generation, self.thinking.markers,
                               self.thinking.on and th.prompt_opens_trace(context, self.thinking.markers))
        if trace.reasoning is None and not self.thinking.on:
            return generation, {}
        return cut_at_stop(trace.answer, stop), th.trace_fields(trace, self.count_tokens, generation)

    @property
    def constrained(self) -> bool:
        """Whether --constrained applies to its generations (its record in results.json)."""
        return False

    @property
    def unformatted(self) -> bool:
        """Whether --constrained has nothing to constrain it with: a generative task that declares no answer format
        (TaskSpec.output_pattern)."""
        return False

    def declared_prompts(self) -> dict[str, Any]:
        """Every prompt of the kind, by name, as declared (results.json hashes them: task_versions)."""
        return {p.name: p for p in self.spec.prompts}

    def declared_metrics(self) -> Sequence[Any]:
        """The metrics its prompts are scored with, the headline first (results.json records them)."""
        return self.spec.metrics

    def value_json(self, value: Any, backend_name: str) -> Any:
        """A backend's result as the resume cache stores it."""
        return value

    def scores(self, samples: list[dict]) -> tuple[dict[str, float], dict[str, int] | None]:
        """The prompt's scores, and how its answers were read (instruct settings; else None)."""
        return {m.name: m(samples) for m in self.spec.metrics}, None

    def baselines(self, docs: list[dict], prompts: list[str]) -> dict:
        return generative_baselines(len(docs))

    def _label_baselines(self, metrics: Sequence[Any], docs: list[dict], prompts: list[str]) -> dict:
        if not (docs and prompts):
            return generative_baselines(len(docs))
        golds = [self.task.target(d) for d in docs]
        n_choices = [len(self.task.choices(prompts[0], d)) for d in docs]
        # ROUGE-L, BLEU, BERTScore compare texts: no class baseline
        label_metrics = [m for m in metrics if m not in SETTING_METRICS]
        return task_baselines(label_metrics, golds, n_choices)


class ScoredChoice(TaskKind):
    request_kind = RequestKind.LOGLIKELIHOOD

    @property
    def budget(self) -> int | None:
        return None

    def requests(self, prompt: str, docs: list[dict], contexts: list[str], turns: Turns,
                 delimiter: str) -> list[LLRequest]:
        return [LLRequest(ctx, delimiter + c) for ctx, d in zip(contexts, docs) for c in self.task.choices(prompt, d)]

    def value_json(self, value: Any, backend_name: str) -> Any:
        return [check_ll_result(value, backend_name).logprob, value.is_greedy]

    def samples(self, prompt: str, docs: list[dict], contexts: list[str], values: list[Any]) -> list[dict]:
        samples, pos = [], 0
        for i, (doc, ctx) in enumerate(zip(docs, contexts)):
            cs = self.task.choices(prompt, doc)
            lls = [v[0] for v in values[pos : pos + len(cs)]]
            greedy = [bool(v[1]) for v in values[pos : pos + len(cs)]]
            pos += len(cs)
            samples.append({"doc_id": i, "prompt": ctx, "choices": cs, "loglikelihoods": lls, "is_greedy": greedy,
                            "prediction": mc_prediction(lls, cs), "gold": self.task.target(doc)})
        return samples

    def baselines(self, docs: list[dict], prompts: list[str]) -> dict:
        return self._label_baselines(self.spec.metrics, docs, prompts)


class InstructChoice(TaskKind):
    @cached_property
    def task(self) -> Any:
        return st.setting_task(self.entry.task_id, self.setting)

    @property
    def askable(self) -> bool:
        return self.spec.instruct is not None

    @property
    def budget(self) -> int | None:
        return st.instruct_setting(self.setting).max_new_tokens

    @property
    def stops(self) -> tuple[str, ...]:
        return tuple(st.STOP)

    @property
    def constrained(self) -> bool:
        return self._constrained

    def declared_prompts(self) -> dict[str, Any]:
        return {name: (name, self.setting, self.spec.instruct) for name in ("p1", "p2")}

    def requests(self, prompt: str, docs: list[dict], contexts: list[str], turns: Turns,
                 delimiter: str) -> list[GenRequest]:
        return [self.gen_request(ctx, self.stops,
                                 choice_constraint(self.task.choices(prompt, d)) if self._constrained else None, tt)
                for ctx, d, tt in zip(contexts, docs, turns)]

    def samples(self, prompt: str, docs: list[dict], contexts: list[str], values: list[Any]) -> list[dict]:
        unparsed_as = self.spec.instruct.unparsed_as if self.spec.instruct is not None else None
        samples = []
        for i, (doc, ctx, gen) in enumerate(zip(docs, contexts, values)):
            cs = self.task.choices(prompt, doc)
            answer_texts = st.setting_task(self.entry.task_id, "oe").choices(prompt, doc)
            answer, trace = self.answer_of(ctx, gen, st.STOP)  # the trace never reaches the answer rules
            parsed, rule = ((None, th.UNFINISHED) if trace.get("reasoning_unfinished")
                            else st.parse_answer_rule(self.setting, answer, cs, answer_texts))
            gold = self.task.target(doc)
            samples.append({"doc_id": i, "prompt": ctx, "choices": cs, "generation": answer, **trace, "parsed": parsed,
                            **st.reading_fields(parsed, rule), "parsed_answer": None if parsed is None else cs[parsed],
                            "prediction": st.scored_prediction(parsed, gold, len(cs), unparsed_as), "gold": gold,
                            "gold_answer": answer_texts[gold]})
        if self.added_metrics:  # --bertscore-model: each answer's F1, their mean the prompt's score
            answers, golds = [s["generation"] for s in samples], [s["gold_answer"] for s in samples]
            for s, f1 in zip(samples, bertscore_f1(self.bertscore_model, answers, golds)):
                s["bertscore_f1"] = f1
        return samples

    @property
    def added_metrics(self) -> tuple[Any, ...]:
        """BERTScore F1 where the setting scores texts (OE, CE-NI) and --bertscore-model names a scorer."""
        return (BERTSCORE_F1,) if self.bertscore_model and st.instruct_setting(self.setting).extra_metrics else ()

    def declared_metrics(self) -> Sequence[Any]:
        return st.setting_metrics(self.spec, self.setting, self.added_metrics)

    def scores(self, samples: list[dict]) -> tuple[dict[str, float], dict[str, int] | None]:
        return st.setting_scores(self.spec, self.setting, samples, self.added_metrics), st.rule_counts(samples)

    def baselines(self, docs: list[dict], prompts: list[str]) -> dict:
        return self._label_baselines(st.setting_metrics(self.spec, self.setting), docs, prompts)


class Generation(TaskKind):
    @property
    def constrained(self) -> bool:
        return self._constrained and self.spec.output_pattern is not None

    @property
    def unformatted(self) -> bool:
        return self.spec.output_pattern is None

    def requests(self, prompt: str, docs: list[dict], contexts: list[str], turns: Turns,
                 delimiter: str) -> list[GenRequest]:
        constraint = task_constraint(self.spec) if self._constrained else None
        return [self.gen_request(ctx, self.spec.stop, constraint, tt) for ctx, tt in zip(contexts, turns)]

    def samples(self, prompt: str, docs: list[dict], contexts: list[str], values: list[Any]) -> list[dict]:
        samples = []
        for i, (doc, ctx, gen) in enumerate(zip(docs, contexts, values)):
            answer, trace = self.answer_of(ctx, gen, self.spec.stop)  # an unfinished trace: the empty answer
            samples.append({"doc_id": i, "prompt": ctx, "generation": answer, **trace, "prediction": answer,
                            "reference": self.task.target(doc), "gold": doc[self.spec.gold_field]})
        return samples

    def scores(self, samples: list[dict]) -> tuple[dict[str, float], dict[str, int] | None]:
        scores, _ = super().scores(samples)
        if (failures := format_failures(self.spec, [s["generation"] for s in samples])) is not None:
            scores[st.UNPARSED] = failures  # answers outside the task's declared format (NER/REL/LS)
        return scores, None


def task_kind(entry: TaskEntry, setting: str, constrained: bool = False, max_new_tokens: int | None = None,
              thinking: th.Thinking = th.Thinking(), count_tokens: Callable[[str], int] | None = None) -> TaskKind:
    """The kind of ``entry`` under ``setting`` (``--constrained``, ``--max-new-tokens`` and ``--thinking`` as given)."""
    if entry.spec.output_type != "multiple_choice":
        return Generation(entry, LOGLIKELIHOOD_SETTING, constrained, max_new_tokens, thinking, count_tokens)
    if setting == LOGLIKELIHOOD_SETTING and thinking.on:
        raise ValueError(f"--thinking on: {entry.name} is scored by log-likelihood, where a model writes no trace; ask "
                         "it in a generated setting (--setting ce, ce-ni or oe) or run with --thinking off")
    kind = ScoredChoice if setting == LOGLIKELIHOOD_SETTING else InstructChoice
    return kind(entry, setting, constrained, max_new_tokens, thinking, count_tokens)

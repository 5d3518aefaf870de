"""One object per kind of task: which kind an entry is under each setting, and what it owns
(requests, samples, budget, capability), checked on the small build by hand."""

from __future__ import annotations

from evalita_eval.api import GenRequest, LLRequest
from evalita_eval.api import RequestKind
from evalita_eval.running.task_kinds import Generation, InstructChoice, ScoredChoice, task_kind
from evalita_eval.sources.entries import select_entries
from evalita_eval.sources.folder import FolderSource

from paths import TEST_DATA

DATA = TEST_DATA / "build"


def _entry(name: str):
    return select_entries([name])[0]


def test_each_entry_has_one_kind_per_setting() -> None:
    te, ner = _entry("te"), _entry("ner_fic")
    scored, instruct, generation = task_kind(te, "loglikelihood"), task_kind(te, "ce", constrained=True), task_kind(ner, "ce", constrained=True)
    assert (type(scored), type(instruct), type(generation)) == (ScoredChoice, InstructChoice, Generation)
    assert [k.request_kind for k in (scored, instruct, generation)] == [RequestKind.LOGLIKELIHOOD, RequestKind.GENERATE, RequestKind.GENERATE]
    from evalita_eval.api import Capabilities  # what each kind needs of a backend: Capabilities.serves
    assert [Capabilities(loglikelihood=False).serves(k.request_kind) for k in (scored, instruct)] == [False, True]
    # The paper's budget: none for scoring, the setting's for CE (16), the task's for a generative task.
    assert (scored.budget, instruct.budget, generation.budget) == (None, 16, ner.spec.max_new_tokens)
    assert task_kind(te, "ce", max_new_tokens=5).max_new_tokens == 5
    assert (scored.constrained, instruct.constrained) == (False, True)
    assert list(instruct.declared_prompts()) == ["p1", "p2"]


def test_scored_choice_sends_one_request_per_choice_and_predicts_the_most_likely() -> None:
    te = _entry("te")
    kind = task_kind(te, "loglikelihood")
    docs = FolderSource(str(DATA)).load(te, te.spec.eval_split)[:2]
    prompt = "p1"
    choices = [kind.task.choices(prompt, d) for d in docs]
    requests = kind.requests(prompt, docs, ["A", "B"], [None, None], " ")
    assert requests == [LLRequest(ctx, " " + c) for ctx, cs in zip("AB", choices) for c in cs]
    # Document 1: the second choice is the likelier; document 2: the first.
    values = [[-3.0, False], [-1.0, True], [-0.5, True], [-2.0, False]]
    assert len(requests) == len(values)
    samples = kind.samples(prompt, docs, ["A", "B"], values)
    assert [s["prediction"] for s in samples] == [1, 0]
    assert [s["gold"] for s in samples] == [kind.task.target(d) for d in docs]
    assert samples[0]["loglikelihoods"] == [-3.0, -1.0] and samples[1]["is_greedy"] == [True, False]


def test_generation_sends_one_request_per_document_with_the_tasks_stops() -> None:
    ner = _entry("ner_fic")
    kind = task_kind(ner, "loglikelihood", max_new_tokens=7)
    docs = FolderSource(str(DATA)).load(ner, ner.spec.eval_split)[:3]
    requests = kind.requests("p1", docs, ["a", "b", "c"], [None] * 3, " ")
    assert requests == [GenRequest(ctx, tuple(ner.spec.stop), 7, None, None) for ctx in "abc"]

"""Every prompt of every task renders exactly as lm-eval 0.4.13's evalita_llm task config does.

lm-eval's own ConfigurableTask (its YAML with includes and !function resolved, pointed
at the hand-made build in tests/data/build) renders text, choices and target of each
document; ours must give the same strings and the same gold index.
"""

from __future__ import annotations

import pytest

from paths import TESTS

pytest.importorskip("lm_eval", reason="lm-evaluation-harness (lm-eval==0.4.13, extra 'all') is not installed")

from evalita_data.registry import get_task  # noqa: E402
from evalita_eval.settings.fewshot import build_contexts  # noqa: E402
from evalita_eval.sources.entries import all_entries  # noqa: E402
from evalita_eval.sources.folder import FolderSource  # noqa: E402

HERE = TESTS
DATA = HERE / "data" / "build"

CASES = [(e, p.name) for e in all_entries() for p in e.spec.prompts]


@pytest.mark.parametrize("entry,prompt", CASES, ids=[f"{e.name}-{p}" for e, p in CASES])
def test_prompt_matches_lm_eval(entry, prompt: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from lm_eval_reference import task_config
    from lm_eval.api.task import ConfigurableTask

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    task = ConfigurableTask(config=task_config(entry.name, prompt, "0", DATA))
    docs = FolderSource(DATA).load(entry, get_task(entry.task_id).eval_split)
    ours = entry.compiled
    mc = entry.spec.output_type == "multiple_choice"
    theirs_docs = list(task.test_docs())
    assert len(theirs_docs) == len(docs)
    for doc, their_doc in zip(docs, theirs_docs):
        assert ours.render(prompt, doc) == task.doc_to_text(their_doc)
        target = task.doc_to_target(their_doc)
        if mc:
            choices = task.doc_to_choice(their_doc)
            assert ours.choices(prompt, doc) == choices
            gold = choices.index(target) if isinstance(target, str) else target
            assert ours.target(doc) == gold
        elif entry.task_id != "rel" or doc["relations"]:
            # lm-eval's REL target says &&NOENT&& for no relation (a slip; the prompt asks for &&NOREL&&).
            assert ours.target(doc) == target


def test_fewshot_context_layout() -> None:
    """k examples: prompt, space, answer, blank line; then the document's prompt."""
    entry = next(e for e in all_entries() if e.name == "te")
    src = FolderSource(DATA)
    docs, pool = src.load(entry, "test")[:1], src.load(entry, "dev")
    [ctx] = build_contexts(entry.compiled, "p3", docs, pool, 2, seed=1234)
    parts = ctx.split("\n\n")
    assert len(parts) == 3
    for shot in parts[:2]:
        assert shot.endswith("Risposta: A") or shot.endswith("Risposta: B")
    assert parts[2] == entry.compiled.render("p3", docs[0])

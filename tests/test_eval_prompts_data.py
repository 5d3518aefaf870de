"""Prompt compilation fails loudly on unknown variables; data load from build and Hub-layout folders."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from evalita_data.prompts import PromptError, compile_task
from evalita_data.registry import get_task
from evalita_data.taskspec import MCPrompt
from evalita_eval.tasks import DataSource, select_entries

DATA = Path(__file__).parent / "data" / "build"


def test_unknown_template_variable_fails_at_compile_time() -> None:
    spec = get_task("te")
    bad = dataclasses.replace(spec, prompts=[MCPrompt("p1", "Frase: '{{ text3 }}'", ["Sì", "No"])])
    with pytest.raises(PromptError, match=r"task te, prompt p1: uses text3, which the record does not have"):
        compile_task(bad)


def test_unknown_choice_expression_variable_fails_at_compile_time() -> None:
    spec = get_task("faq")
    bad = dataclasses.replace(spec, prompts=[MCPrompt("p1", "{{ question }}", "[A, B, C, F]")])
    with pytest.raises(PromptError, match="prompt p1 choices: uses F"):
        compile_task(bad)


def test_sandbox_blocks_attribute_escapes() -> None:
    spec = get_task("te")
    evil = dataclasses.replace(spec, prompts=[MCPrompt("p1", "{{ text1.__class__.__mro__ }}", ["Sì", "No"])])
    with pytest.raises(Exception):
        compile_task(evil).render("p1", {"id": "1", "entailment": "SI", "text1": "a", "text2": "b"})


def test_select_entries() -> None:
    assert [e.name for e in select_entries(["ner", "te"])] == ["ner_adg", "ner_fic", "ner_wn", "te"]
    assert [e.name for e in select_entries(["ner_fic"])] == ["ner_fic"]
    with pytest.raises(KeyError, match="unknown task 'xx'"):
        select_entries(["xx"])


def _hub_layout(root: Path) -> None:
    """What `evalita-data push --to-dir` writes: <task>/README.md declaring configs and splits."""
    te = root / "te"
    te.mkdir(parents=True)
    (te / "test.jsonl").write_bytes((DATA / "te" / "test.jsonl").read_bytes())
    (te / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: test.jsonl\n---\n# te\n")
    ner = root / "ner"
    (ner / "data").mkdir(parents=True)
    (ner / "data" / "fic-test.jsonl").write_bytes((DATA / "ner" / "fic" / "test.jsonl").read_bytes())
    (ner / "README.md").write_text("---\nconfigs:\n- config_name: fic\n  data_files:\n  - split: test\n    path: data/fic-test.jsonl\n---\n")


def test_hub_layout_folder(tmp_path: Path) -> None:
    _hub_layout(tmp_path)
    src = DataSource(tmp_path)
    te, ner_fic = select_entries(["te", "ner_fic"])
    assert src.load(te, "test") == [json.loads(x) for x in (DATA / "te" / "test.jsonl").read_text("utf-8").splitlines()]
    assert src.load(ner_fic, "test")[0]["entities"][0] == {"entity_text": "Mario Rossi", "type": "PER"}
    assert len(src.sha256(ner_fic, "test")) == 64


def test_source_needs_exactly_one_origin() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        DataSource()

"""Prompt compilation fails loudly on unknown variables; data load from build and Hub-layout folders."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from evalita_data.prompts import PromptError, compile_task
from evalita_data.registry import get_task
from evalita_data.taskspec import MCPrompt
from evalita_eval.sources.entries import select_entries
from evalita_eval.sources.folder import FolderSource

from paths import TEST_DATA

DATA = TEST_DATA / "build"


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


def test_hub_layout_folder_reads_as_the_build(tmp_path: Path) -> None:
    """`evalita-data push --to-dir` output (README configs, parquet, manifest.json) gives the same
    records and the same split sha256 as the build folder it came from."""
    from click.testing import CliRunner

    from evalita_data.cli import main as data_main
    from evalita_data.building.pipeline import build

    build(TEST_DATA / "raw", tmp_path / "build", tasks=["te", "ner"], progress=False)
    result = CliRunner().invoke(data_main, ["push", "--build", str(tmp_path / "build"), "--to-dir", str(tmp_path / "hub")])
    assert result.exit_code == 0, result.output
    from_build, from_hub = FolderSource(tmp_path / "build"), FolderSource(tmp_path / "hub")
    for entry in select_entries(["te", "ner_fic"]):
        for split in ("test", entry.spec.fewshot_split):
            assert from_hub.load(entry, split) == from_build.load(entry, split)
            assert from_hub.sha256(entry, split) == from_build.sha256(entry, split)
    assert len(from_hub.load(select_entries(["ner_fic"])[0], "trial")) == 5


def test_open_source_picks_one_source_class_per_origin(tmp_path: Path) -> None:
    from evalita_eval.sources import open_source
    from evalita_eval.sources.base import Source
    from evalita_eval.sources.hub import HubSource
    from evalita_eval.sources.official import OfficialSource

    with pytest.raises(ValueError, match="exactly one"):
        open_source()
    with pytest.raises(ValueError, match="exactly one"):
        open_source(DATA, "someorg")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        open_source(tmp_path / "absent")
    folder, hub, official = open_source(DATA), open_source(hub_org="someorg"), open_source("hf:evalitahf")
    assert (type(folder), type(hub), type(official)) == (FolderSource, HubSource, OfficialSource)
    assert (folder.description, hub.description, official.description) == (str(DATA), "hf://someorg", "hf:evalitahf")
    assert (folder.folder, hub.folder, official.folder) == (Path(DATA), None, None)
    assert all(isinstance(s, Source) for s in (folder, hub, official))
    assert (folder.provenance(), hub.provenance(), official.provenance()) == ({}, {}, {"revisions": {}})

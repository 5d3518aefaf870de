"""`push --layout official`: the official names, the splits it lacks listed one line each, the
eval.yaml of both layouts, and a task without an official copy refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from evalita_data import registry
from evalita_data.cli import main
from evalita_data.hub.benchmark import benchmark_task_ids, eval_yaml, read_benchmark
from evalita_data.hub.push import write_to_dir
from evalita_data.registry import ENV_VAR
from paths import TESTS
from publish_fixtures import make_ner_build


def test_ner_domains_get_the_official_names_and_the_lacking_trial_splits_are_listed(tmp_path: Path) -> None:
    build_dir = make_ner_build(tmp_path / "build")
    lines: list[str] = []
    write_to_dir(build_dir, tmp_path / "hub", echo=lines.append, layout="official")
    repo = tmp_path / "hub" / "entity_recognition"
    assert sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*.parquet")) == [
        "data/adg/dev-00000-of-00001.parquet", "data/adg/reduced_test-00000-of-00001.parquet",
        "data/adg/train-00000-of-00001.parquet", "data/adg/trial-00000-of-00001.parquet",
        "data/fic/reduced_test-00000-of-00001.parquet", "data/fic/train-00000-of-00001.parquet",
        "data/wn/reduced_test-00000-of-00001.parquet"]
    # FIC and WN have no trial split (lm-eval's few-shot split): one line each, never stood in for.
    assert [line for line in lines if line.startswith("missing: ")] == [
        "missing: evalita-llm/entity_recognition [fic]: no split trial: our trial split is not in the build",
        "missing: evalita-llm/entity_recognition [wn]: no split trial: our trial split is not in the build"]
    meta = yaml.safe_load((repo / "README.md").read_text("utf-8").split("---\n")[1])
    assert [(c["config_name"], [f["split"] for f in c["data_files"]]) for c in meta["configs"]] == [
        ("adg", ["train", "dev", "trial", "reduced_test"]), ("fic", ["train", "reduced_test"]), ("wn", ["reduced_test"])]
    assert 'load_dataset("evalita-llm/entity_recognition", "adg")' in (repo / "README.md").read_text("utf-8")
    tasks = read_benchmark(repo / "eval.yaml")
    assert [(t["id"], t["config"], t["split"]) for t in tasks[:3]] == [
        ("ner_adg", "adg", "reduced_test"), ("ner_adg_p1", "adg", "reduced_test"), ("ner_adg_p2", "adg", "reduced_test")]
    assert benchmark_task_ids(repo) == ["ner_adg", "ner_adg_p1", "ner_adg_p2", "ner_fic", "ner_fic_p1", "ner_fic_p2",
                                        "ner_wn", "ner_wn_p1", "ner_wn_p2"]
    # Our layout: the same task ids, on our split name.
    write_to_dir(build_dir, tmp_path / "ours", echo=lambda _m: None)
    ours = read_benchmark(tmp_path / "ours" / "ner" / "eval.yaml")
    assert [t["id"] for t in ours] == benchmark_task_ids(repo) and {t["split"] for t in ours} == {"test"}


@pytest.fixture
def added_task_build(tmp_path: Path):
    from evalita_data.building.pipeline import build

    extra = TESTS / "extra_tasks"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_VAR, str(extra))
        registry.reload()
        build(extra / "raw", tmp_path / "build", tasks=["capitals"], progress=False)
        yield tmp_path / "build"
    registry.reload()


def test_a_task_without_an_official_copy_is_refused_before_anything_is_written(added_task_build: Path, tmp_path: Path) -> None:
    dest = tmp_path / "hub"
    result = CliRunner().invoke(main, ["push", "--build", str(added_task_build), "--to-dir", str(dest), "--layout", "official"])
    assert result.exit_code == 1
    assert result.output == ("error: capitals: the task declares no official layout (TaskSpec.hub_splits); "
                             "publish it with --layout ours\n")
    assert not dest.exists() or not any(dest.rglob("*"))
    # Its benchmark tasks in our layout: the entry, then one per prompt.
    prompts = [p.name for p in registry.get_task("capitals").prompts]
    (tmp_path / "eval.yaml").write_bytes(eval_yaml("capitals", {None: "test"}))
    assert benchmark_task_ids(tmp_path / "eval.yaml") == ["capitals"] + [f"capitals_{p}" for p in prompts]
    assert eval_yaml("capitals", {}) is None  # no evaluation split published: no benchmark file

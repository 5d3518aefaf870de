"""Registry-driven end to end: every registered task, the ten built-in ones and the test task
of tests/extra_tasks/ (added through EVALITA_TASK_PATH, an MC and a generative variant), is
built from the raw fixtures, validated, rendered with every prompt, and evaluated on a few
documents with the tiny model through every registered backend that runs here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_data import registry
from evalita_data.registry import ENV_VAR, TaskRegistryError, discover

from paths import TESTS

HERE = TESTS
EXTRA = HERE / "extra_tasks"
RAW = HERE / "data" / "raw"
# Hand-made evaluation splits for the tasks whose raw fixtures lack them (HS gold, REL test).
EVAL_FIXTURES = HERE / "data" / "build"
LIMIT = 2


def _registered() -> list[str]:
    """The task ids of the registry as the ``extra_registry`` fixture sets it up."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_VAR, str(EXTRA))
        return list(discover())


def _backends() -> list[str]:
    from evalita_eval.backends import backend_names

    return backend_names()


def _raw_root(task_id: str) -> Path:
    spec = registry.get_task(task_id)
    return EXTRA / "raw" if (EXTRA / "raw" / spec.raw_dir).is_dir() else RAW


@pytest.fixture(scope="module")
def extra_registry(tiny_model: Path):
    # The tiny model's tokenizer is trained on the registry's prompts: build it from the
    # built-in tasks only, before the extra folder is registered, as in every other test.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_VAR, str(EXTRA))
        registry.reload()
        yield registry.tasks()
    registry.reload()


@pytest.fixture(scope="module")
def built(extra_registry, tmp_path_factory) -> Path:
    from evalita_data.building.pipeline import build

    out = tmp_path_factory.mktemp("e2e") / "build"
    by_root: dict[Path, list[str]] = {}
    for tid in extra_registry:
        by_root.setdefault(_raw_root(tid), []).append(tid)
    for root, ids in by_root.items():
        build(root, out, tasks=ids, progress=False)
    return out


_LOADED: dict[str, object] = {}


def _backend(name: str, model: Path):
    """One instance per backend for the whole module; skips engines that cannot run here."""
    from evalita_eval.api import BackendOptions, BackendUnsupported
    from evalita_eval.backends import create_backend

    if name not in _LOADED:
        try:
            _LOADED[name] = create_backend(name, BackendOptions(str(model), dtype="float32", batch_size=4, threads=1))
        except ImportError as err:
            _LOADED[name] = f"backend {name!r}: its engine is not importable here ({err})"
        except (BackendUnsupported, ValueError) as err:
            _LOADED[name] = f"backend {name!r} does not run on this machine without a server or device ({err})"
    if isinstance(_LOADED[name], str):
        pytest.skip(_LOADED[name])
    return _LOADED[name]


def test_the_extra_task_takes_four_files_and_no_edit() -> None:
    files = sorted(p.relative_to(EXTRA).as_posix() for p in EXTRA.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    # spec, converter, schema, raw README; plus the raw data themselves
    assert files == ["capitals.py", "capitals.schema.json", "capitals_convert.py", "raw/capitals/README.md", "raw/capitals/capitals.tsv"]
    root = HERE.parent
    for folder in ("evalita_data", "eval", "converters", "schemas"):
        for path in (root / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".json"):
                assert "capitals" not in path.read_text("utf-8"), path


def test_registry_discovers_builtin_and_extra_tasks() -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(ENV_VAR, raising=False)
        builtin = list(discover())
    assert builtin == ["wic", "te", "sa", "hs", "faq", "at", "ls", "ner", "rel", "sum"]  # the paper's order
    assert _registered() == builtin + ["capitals", "capitals_gen", "capitals_yesno"]


@pytest.mark.parametrize("task_id", _registered())
def test_build_validate_render(task_id: str, extra_registry, built: Path) -> None:
    from evalita_data.registry import compiled
    from evalita_data.validate import validate_path

    spec = extra_registry[task_id]
    manifest = json.loads((built / "manifest.json").read_text("utf-8"))
    assert task_id in manifest["tasks"], manifest["not_built"].get(task_id)
    splits = manifest["tasks"][task_id]["splits"]
    assert splits and spec.split_names() >= {key.rsplit("/", 1)[-1] for key in splits}
    task = compiled(task_id)
    for key in splits:
        path = built / task_id / f"{key}.jsonl"
        assert validate_path(path, task_id) == ([], 1)
        records = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
        assert len(records) == manifest["tasks"][task_id]["splits"][key]["rows"]
        for rec in records[:LIMIT]:
            for p in spec.prompts:
                assert task.render(p.name, rec).strip()
                if spec.output_type == "multiple_choice":
                    choices = task.choices(p.name, rec)
                    assert len(choices) >= 2 and all(isinstance(c, str) for c in choices)
                    assert 0 <= task.target(rec) < len(choices)
                else:
                    assert isinstance(task.target(rec), str) and spec.gold_field in rec


@pytest.mark.parametrize("backend_name", _backends())
@pytest.mark.parametrize("task_id", _registered())
def test_evaluate_every_task_with_every_backend(task_id: str, backend_name: str, extra_registry, built: Path,
                                                tiny_model: Path, tmp_path: Path) -> None:
    import re

    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.run_config import RunSpec
    from evalita_eval.sources.entries import select_entries
    from evalita_eval.sources.folder import FolderSource

    spec = extra_registry[task_id]
    backend = _backend(backend_name, tiny_model)
    caps = backend.capabilities
    if not (caps.loglikelihood if spec.output_type == "multiple_choice" else caps.generate):
        pytest.skip(f"backend {backend_name!r} cannot serve {spec.output_type} tasks")
    entries = select_entries([task_id])
    data = built if all(FolderSource(built).has_split(e, spec.eval_split) for e in entries) else EVAL_FIXTURES
    source = FolderSource(data)
    runner = Runner(backend, ModelInfo(str(tiny_model), None, backend.dtype, backend_name), source,
                    RunSpec(model="m", data="data", limit=LIMIT, max_new_tokens=4, progress=False), tmp_path, echo=lambda _m: None)
    result = runner.run(entries)
    assert list(result.record.results) == [name for name, _config in spec.entries()]
    for entry in entries:
        n = min(LIMIT, len(source.load(entry, spec.eval_split)))
        assert list(result.record.results[entry.name]) == [p.name for p in spec.prompts]
        for prompt, scores in result.record.results[entry.name].items():
            formatted = spec.output_pattern is not None  # NER/REL/LS, capitals_yesno: answers outside the format are counted
            assert set(scores) == set(spec.metric_names()) | {"n"} | ({"unparsed"} if formatted else set()) and scores["n"] == n
            assert all(0.0 <= v <= 1.0 for m, v in scores.items() if m not in ("n", "unparsed"))
            samples = [json.loads(x) for x in (tmp_path / "samples" / f"{entry.name}_{prompt}.jsonl").read_text("utf-8").splitlines()]
            if formatted:
                assert scores["unparsed"] == sum(re.fullmatch(spec.output_pattern, s["generation"]) is None for s in samples)
            assert len(samples) == n
            for doc, s in zip(source.load(entry, spec.eval_split), samples):
                if spec.output_type == "generate_until":
                    assert s["gold"] == doc[spec.gold_field]  # the field the spec names, not a table in the runner
                else:
                    assert len(s["loglikelihoods"]) == len(s["choices"]) and all(ll < 0 for ll in s["loglikelihoods"])


@pytest.mark.parametrize("backend_name", _backends())
def test_a_generative_setting_on_every_instruct_task(backend_name: str, extra_registry, built: Path, tiny_model: Path, tmp_path: Path) -> None:
    """--setting ce --constrained on every registered MC task that declares instruct prompts: answers
    generated under the letter constraint, so every one parses; an MC task without them is refused."""
    from evalita_eval.running.runner import ModelInfo, Runner
    from evalita_eval.run_config import RunSpec
    from evalita_eval.settings.instruct import setting_metrics
    from evalita_eval.sources.entries import select_entries
    from evalita_eval.sources.folder import FolderSource

    backend = _backend(backend_name, tiny_model)
    if not (backend.capabilities.generate and backend.capabilities.constrained):
        pytest.skip(f"backend {backend_name!r} cannot do constrained generation")
    config = RunSpec(model="m", data="data", limit=LIMIT, max_new_tokens=4, progress=False, setting="ce", constrained=True)
    ids = [t for t, spec in extra_registry.items() if spec.output_type == "multiple_choice" and spec.instruct is not None]
    assert ids == ["wic", "te", "sa", "hs", "faq", "at"]
    for task_id in ids:
        spec = extra_registry[task_id]
        [entry] = select_entries([task_id])
        source = FolderSource(built if FolderSource(built).has_split(entry, spec.eval_split) else EVAL_FIXTURES)
        out = tmp_path / task_id
        result = Runner(backend, ModelInfo(str(tiny_model), None, backend.dtype, backend_name), source, config, out, echo=lambda _m: None).run([entry])
        n = min(LIMIT, len(source.load(entry, spec.eval_split)))
        assert list(result.record.results[task_id]) == ["p1", "p2"]
        for prompt, scores in result.record.results[task_id].items():
            assert set(scores) == {m.name for m in setting_metrics(spec, "ce")} | {"unparsed", "n"}
            assert scores["n"] == n and scores["unparsed"] == 0
            samples = [json.loads(x) for x in (out / "samples" / f"{task_id}_{prompt}.jsonl").read_text("utf-8").splitlines()]
            assert [s["generation"] for s in samples] == [s["choices"][s["parsed"]] for s in samples]
            assert all(s["generation"] in "ABCDE" for s in samples)
            assert scores["acc"] == sum(s["parsed"] == s["gold"] for s in samples) / n
    # The extra MC task declares no instruct prompts: refused before any request, naming it.
    [entry] = select_entries(["capitals"])
    runner = Runner(backend, ModelInfo(str(tiny_model), None, backend.dtype, backend_name), FolderSource(built),
                    config.model_copy(update={"tasks": ["capitals"]}), tmp_path / "capitals", echo=lambda _m: None)
    with pytest.raises(ValueError, match="--setting ce needs the instruct prompts .* capitals do"):
        runner.run([entry])
    assert not (tmp_path / "capitals").exists()
    # A run over every task (skip_missing) goes on without it, with a note.
    notes: list[str] = []
    runner = Runner(backend, ModelInfo(str(tiny_model), None, backend.dtype, backend_name), FolderSource(built),
                    config, tmp_path / "all", echo=notes.append)
    assert runner.run([entry]).record.results == {}
    assert notes == ["capitals: skipped, the task declares no instruct prompts for --setting ce"]


def test_extra_task_through_both_clis(extra_registry, tiny_model: Path, tmp_path: Path) -> None:
    from evalita_data.cli import main as data_main
    from evalita_eval.cli import main as eval_main

    out = tmp_path / "build"
    res = CliRunner().invoke(data_main, ["build", "--raw", str(EXTRA / "raw"), "--out", str(out), "--task", "capitals", "capitals_gen"])
    assert res.exit_code == 0, res.output
    assert "capitals: dev 1, test 2" in res.output
    res = CliRunner().invoke(eval_main, ["run", "--model", str(tiny_model), "--data", str(out), "--tasks", "capitals,capitals_gen",
                                         "--max-new-tokens", "3", "--threads", "1", "--output-dir", str(tmp_path / "res")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "res" / "results.json").read_text("utf-8"))
    assert sorted(doc["results"]) == ["capitals", "capitals_gen"]
    assert set(doc["results"]["capitals_gen"]["p1"]) == {"exact_match", "n"}
    assert doc["results"]["capitals"]["p2"]["n"] == 2


def _bad_task(folder: Path, **changes: str) -> Path:
    """A copy of the extra task with one field of the MC variant's spec replaced (source text)."""
    folder.mkdir()
    text = (EXTRA / "capitals.py").read_text("utf-8")
    for old, new in changes.items():
        assert old in text
        text = text.replace(old, new, 1)
    (folder / "capitals.py").write_text(text, "utf-8")
    for name in ("capitals_convert.py", "capitals.schema.json"):
        (folder / name).write_bytes((EXTRA / name).read_bytes())
    return folder


@pytest.mark.parametrize("change, problem", [
    ({'"Qual è la capitale di {{country}}?"': '"Qual è la capitale di {{nazione}}?"'}, "uses nazione, which the record does not have"),
    ({'HERE / "capitals.schema.json"': 'HERE / "missing.schema.json"'}, "missing.schema.json does not exist"),
    ({'id="capitals",': 'id="te",'}, "task id 'te' is already declared in"),
    ({'eval_split="test",': 'eval_split="tset",'}, "eval_split 'tset' is not one of the splits"),
    ({'gold_field="capital",': 'gold_field=None,'}, "a generative task needs gold_field"),
    # The answer format of capitals_yesno: a regex, with closings it accepts, for generative tasks only.
    ({'output_pattern="Sì|No",': 'output_pattern="Sì|(No",'}, "output_pattern 'Sì|(No' is not a regular expression"),
    ({'output_closings=("Sì", "No"),': 'output_closings=("Sì", "Forse"),'}, "closing answer 'Forse' does not match output_pattern 'Sì|No'"),
    ({'output_closings=("Sì", "No"),': ''}, "output_pattern needs output_closings"),
    ({'metrics=[ACC, ACC_NORM],': 'metrics=[ACC, ACC_NORM], output_pattern="A|B", output_closings=("A",),'},
     "output_pattern is for generative tasks"),
    ({'converter=convert,': 'converter="capitals_convert.convert",'}, "converter 'capitals_convert.convert': expected a function or \"module:function\""),
])
def test_a_bad_spec_stops_the_registry_naming_its_file(change: dict, problem: str, tmp_path: Path) -> None:
    folder = _bad_task(tmp_path / "tasks", **change)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV_VAR, str(folder))
        with pytest.raises(TaskRegistryError) as err:
            discover()
    assert str(folder / "capitals.py") in str(err.value) and problem in str(err.value)


def test_an_installed_package_adds_tasks_through_its_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution on sys.path whose entry point (group evalita_llm.tasks) names a task module."""
    pkg = tmp_path / "capitals_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", "utf-8")
    for name in ("capitals.py", "capitals_convert.py", "capitals.schema.json"):
        (pkg / name).write_bytes((EXTRA / name).read_bytes())
    info = tmp_path / "capitals_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: capitals-pkg\nVersion: 1.0\n", "utf-8")
    (info / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\ncapitals = capitals_pkg.capitals\n", "utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(ENV_VAR, raising=False)
    found = discover()
    assert list(found)[-3:] == ["capitals", "capitals_gen", "capitals_yesno"]
    assert found["capitals"].schema_path() == (pkg / "capitals.schema.json").resolve()

"""Issue 11 (evaluation side): the data evaluated are the data hashed, no stale cache, one-line
errors, an honest run (progress, counts, Ctrl-C, partial results), tests isolated from ~/.cache."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from paths import TESTS

pytest.importorskip("torch")

from evalita_data.cli import main as data_main  # noqa: E402
from evalita_data.building.pipeline import build  # noqa: E402
from evalita_eval.cli import main  # noqa: E402
from evalita_eval.sources.base import DataMismatch  # noqa: E402
from evalita_eval.sources.entries import select_entries  # noqa: E402
from evalita_eval.sources.folder import FolderSource  # noqa: E402
from evalita_eval.sources.hub import HubSource  # noqa: E402

from clear_errors import assert_one_clear_line  # noqa: E402

HERE = TESTS
TE = select_entries(["te"])[0]


def run(*args: object) -> Result:
    return CliRunner().invoke(main, ["run", *map(str, args)])


def hub_folder(raw: Path, tmp_path: Path, name: str) -> Path:
    build(raw, tmp_path / f"build-{name}", tasks=["te"], progress=False)
    result = CliRunner().invoke(data_main, ["push", "--build", str(tmp_path / f"build-{name}"), "--to-dir", str(tmp_path / name)])
    assert result.exit_code == 0, result.output
    return tmp_path / name


def test_caches_point_into_a_temporary_folder() -> None:
    home = Path.home() / ".cache"
    for name in ("HF_HOME", "HF_DATASETS_CACHE", "HF_HUB_CACHE", "XDG_CACHE_HOME", "TRANSFORMERS_CACHE"):
        assert not Path(os.environ[name]).resolve().is_relative_to(home.resolve()), name
    import datasets.config
    import huggingface_hub.constants

    assert Path(datasets.config.HF_DATASETS_CACHE).resolve().is_relative_to(Path(os.environ["HF_HOME"]).resolve().parent)
    assert Path(huggingface_hub.constants.HF_HUB_CACHE).resolve() == Path(os.environ["HF_HUB_CACHE"]).resolve()


def test_two_hub_layout_folders_in_a_row_give_their_own_data(raw_copy, tmp_path: Path) -> None:
    """The stale-cache case: the second folder must not be served the first one's rows."""
    raw = raw_copy("te")
    first = hub_folder(raw, tmp_path, "hub1")
    test_xml = raw / "te" / "EVALITA2009_RTE_test.xml"
    text = test_xml.read_text("utf-8")
    test_xml.write_text(text.replace("<t>", "<t>Modificato. ", 1), "utf-8")  # other data, same task and config
    second = hub_folder(raw, tmp_path, "hub2")
    a, b = FolderSource(first).load(TE, "test"), FolderSource(second).load(TE, "test")
    assert a != b
    for folder, rows in ((first, a), (second, b)):
        built = folder.parent / f"build-{folder.name}" / "te" / "test.jsonl"
        assert rows == [json.loads(line) for line in built.read_text("utf-8").splitlines()]
        assert FolderSource(folder).sha256(TE, "test") == hashlib.sha256(built.read_bytes()).hexdigest()


def test_data_that_differ_from_their_manifest_are_refused(raw_copy, tmp_path: Path, tiny_model: Path) -> None:
    out = tmp_path / "build"
    build(raw_copy("te"), out, tasks=["te"], progress=False)
    path = out / "te" / "test.jsonl"
    lines = path.read_text("utf-8").splitlines()
    rec = json.loads(lines[0])
    key = next(k for k, v in rec.items() if isinstance(v, str) and len(v) > 3 and k != "id")
    rec[key] = rec[key] + " (edited)"
    lines[0] = json.dumps(rec, ensure_ascii=False)
    path.write_text("\n".join(lines) + "\n", "utf-8")  # valid, but not what the build wrote
    with pytest.raises(DataMismatch, match="differs from .*manifest.json"):
        FolderSource(out).load(TE, "test")
    assert_one_clear_line(run("--model", tiny_model, "--data", out, "--tasks", "te", "--output-dir", tmp_path / "o"),
                          str(path), "differs from")
    assert not (tmp_path / "o" / "results.json").exists()


def test_results_record_the_hash_of_what_was_evaluated(raw_copy, tmp_path: Path, tiny_model: Path) -> None:
    hub = hub_folder(raw_copy("te"), tmp_path, "hub")
    result = run("--model", tiny_model, "--data", hub, "--tasks", "te", "--prompts", "p1", "--limit", "2", "--output-dir", tmp_path / "o")
    assert result.exit_code == 0, result.output
    doc = json.loads((tmp_path / "o" / "results.json").read_text("utf-8"))
    rows = FolderSource(hub).load(TE, "test")
    evaluated = hashlib.sha256("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()).hexdigest()
    assert doc["data"]["manifest_sha256"]["te"]["test"] == evaluated
    assert doc["status"] == "complete"


@pytest.mark.parametrize("case", ["missing-model", "raw-folder", "rel-test", "hs-test"])
def test_user_mistakes_are_one_line(case: str, tmp_path: Path, tiny_model: Path) -> None:
    build(HERE / "data" / "raw", tmp_path / "build", tasks=["te", "rel", "hs"], progress=False)
    args, fragments = {
        "missing-model": (["--model", tmp_path / "no-such-model", "--data", tmp_path / "build"], ["no such model folder"]),
        "raw-folder": (["--model", tiny_model, "--data", HERE / "data" / "raw"], ["is not a build folder"]),
        "rel-test": (["--model", tiny_model, "--data", tmp_path / "build", "--tasks", "rel"], ["rel: no split 'test'", "not public"]),
        "hs-test": (["--model", tiny_model, "--data", tmp_path / "build", "--tasks", "hs"], ["hs: no split 'test_all'", "not built"]),
    }[case]
    assert_one_clear_line(run(*args, "--output-dir", tmp_path / "o"), *fragments)


@pytest.mark.parametrize("env", [{"HF_HUB_OFFLINE": "1"}, {"HF_ENDPOINT": "http://127.0.0.1:9"}])
def test_hub_org_unreachable_is_one_line(env: dict, tmp_path: Path, tiny_model: Path) -> None:
    full = {**os.environ, **env, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "2"}
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(tiny_model), "--hub-org", "evalita-llm",
                           "--tasks", "te", "--output-dir", str(tmp_path / "o")], env=full, capture_output=True, text=True)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1 and "hf://datasets/evalita-llm/te/" in errors[0], proc.stderr[-2000:]


def test_a_run_prints_progress_a_task_table_and_exact_counts(tmp_path: Path, tiny_model: Path) -> None:
    args = ["--model", tiny_model, "--data", HERE / "data" / "build", "--tasks", "te", "--limit", "2", "--output-dir", tmp_path / "o"]
    first = run(*args, "--progress")
    assert first.exit_code == 0, first.output
    # One bar per request kind for the run's stream (running/stream.py): 6 prompts x 2 docs x 2 choices.
    assert re.search(r"log-likelihoods: 100%.*\b24/24 \[", first.output), first.output
    assert re.search(r"^task\s+metric\s+n\s+prompts\s+AvgP %\s+MaxP %\s+CPS %\s+chance %\s+majority %$", first.output, re.M)
    # 2 items: n, the baselines of te's two classes (chance 50.00) and the note that 2 items measure nothing
    assert re.search(r"^te\s+acc\s+2\s+6(\s+\d+\.\d\d){3}\s+50\.00\s+\d+\.\d\d\s+not a measurement: fewer than 30 items$",
                     first.output, re.M), first.output
    assert "\n24 requests computed, 0 read from the cache" in first.output and "(24 in all)" in first.output
    again = run(*args, "--no-progress")
    assert "\n0 requests computed, 24 read from the cache" in again.output
    assert "24/24" not in again.output


def test_a_null_cache_value_is_computed_again(tmp_path: Path, tiny_model: Path) -> None:
    args = ["--model", tiny_model, "--data", HERE / "data" / "build", "--tasks", "te", "--prompts", "p1", "--limit", "2", "--output-dir", tmp_path / "o"]
    assert run(*args).exit_code == 0
    cache = tmp_path / "o" / "cache.jsonl"
    lines = cache.read_text("utf-8").splitlines()
    lines[1] = json.dumps({"key": json.loads(lines[1])["key"], "value": None})
    cache.write_text("\n".join(lines) + "\n", "utf-8")
    again = run(*args)
    assert again.exit_code == 0, again.output
    assert "\n1 requests computed, 3 read from the cache" in again.output


def test_ctrl_c_keeps_finished_work_marks_results_partial_and_report_refuses(tmp_path: Path, tiny_model: Path, monkeypatch) -> None:
    from evalita_eval.running import runner

    original = runner.Runner.run_entry

    def interrupt_on_wic(self, entry):
        if entry.name == "wic":
            raise KeyboardInterrupt
        return original(self, entry)

    monkeypatch.setattr(runner.Runner, "run_entry", interrupt_on_wic)
    out = tmp_path / "o"
    args = ["--model", tiny_model, "--data", HERE / "data" / "build", "--tasks", "te,wic", "--prompts", "p1", "--limit", "2", "--output-dir", out]
    result = run(*args)
    assert result.exit_code == 130
    assert "interrupted: " in result.output and "results.json is marked partial; rerun the same command to resume" in result.output
    assert "Traceback" not in result.output and "Aborted!" not in result.output
    doc = json.loads((out / "results.json").read_text("utf-8"))
    assert doc["status"] == "partial" and list(doc["results"]) == ["te"]
    pytest.importorskip("matplotlib")
    report = CliRunner().invoke(main, ["report", str(out / "results.json"), "--out", str(tmp_path / "r"), "--bootstrap", "0"])
    assert_one_clear_line(report, "an unfinished run (status 'partial'")
    monkeypatch.setattr(runner.Runner, "run_entry", original)
    resumed = run(*args)
    assert resumed.exit_code == 0 and json.loads((out / "results.json").read_text("utf-8"))["status"] == "complete"
    # The stream (running/stream.py) computed wic's requests before Ctrl-C landed in its assembly: all read back.
    assert "\n0 requests computed, 8 read from the cache" in resumed.output


def test_eval_debug_shows_the_traceback(tmp_path: Path, monkeypatch) -> None:
    from evalita_eval.sources import entries as tasks

    def boom(*_a, **_k):
        raise RuntimeError("an unexpected failure")

    monkeypatch.setattr(tasks, "select_entries", boom)
    (tmp_path / "config.json").write_text("{}", "utf-8")  # a model folder, as far as the --model check sees
    args = ["run", "--model", str(tmp_path), "--data", str(HERE / "data" / "build")]
    plain = CliRunner().invoke(main, args)
    assert_one_clear_line(plain, "RuntimeError: an unexpected failure")
    debug = CliRunner().invoke(main, ["--debug", *args])
    assert isinstance(debug.exception, RuntimeError)


def test_an_invalid_hub_org_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--hub-org '../../x' is not a valid Hub name"):
        HubSource("../../x")
    (tmp_path / "config.json").write_text("{}", "utf-8")  # a model folder, as far as the --model check sees
    result = run("--model", tmp_path, "--hub-org", "../../x", "--tasks", "te", "--output-dir", tmp_path / "o")
    assert_one_clear_line(result, "not a valid Hub name")

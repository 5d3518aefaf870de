"""The run record (docs/run-record.md): what `run` writes passes the shipped JSON Schemas; every damaged record is one
line and exit 1 through the real CLI; comparability is recomputed from the recorded config, never read from the flag."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from evalita_eval.api import LOGPROB_ROUNDING
from evalita_eval.cli import main
from evalita_eval.record import FORMAT_VERSION, RESULTS_SCHEMA, SAMPLE_SCHEMA, read_run, run_id

from paths import TEST_DATA

LIMIT_REASON = "--limit 3: only the first 3 items of each task"
PROMPTS_REASON = "--prompts p1,p2: leaves out te p3, te p4, te p5, te p6"


def _run(tiny_model: Path, out: Path, *extra: str, tasks: str = "te") -> Path:
    res = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(TEST_DATA / "build"), "--tasks", tasks,
                                    "--prompts", "p1,p2", "--limit", "3", "--output-dir", str(out), "--no-progress", *extra])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def runs(tiny_model: Path, tmp_path_factory) -> tuple[Path, Path]:
    """Two runs of the tiny model that differ only in their seed (two run ids)."""
    root = tmp_path_factory.mktemp("record")
    return _run(tiny_model, root / "a"), _run(tiny_model, root / "b", "--seed", "7")


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", *args], capture_output=True, text=True, env=env)


def test_what_run_writes_passes_the_shipped_schemas(runs: tuple[Path, Path]) -> None:
    a, b = runs
    doc = json.loads((a / "results.json").read_text("utf-8"))
    results_schema = Draft202012Validator(json.loads(RESULTS_SCHEMA.read_text("utf-8")))
    sample_schema = Draft202012Validator(json.loads(SAMPLE_SCHEMA.read_text("utf-8")))
    assert list(results_schema.iter_errors(doc)) == []
    assert doc["format_version"] == FORMAT_VERSION == 2
    files = sorted((a / "samples").glob("*.jsonl"))
    assert [f.name for f in files] == ["te_p1.jsonl", "te_p2.jsonl"]
    for path in files:
        lines = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
        assert [s["doc_id"] for s in lines] == [0, 1, 2]
        assert all(s["run_id"] == doc["run_id"] and list(sample_schema.iter_errors(s)) == [] for s in lines)
    # the schema's bound on log-likelihoods is the backend contract's rounding
    assert json.loads(SAMPLE_SCHEMA.read_text("utf-8"))["properties"]["loglikelihoods"]["items"]["maximum"] == LOGPROB_ROUNDING
    record = read_run(a)
    assert (record.run_id, record.format_version, record.config.limit, record.config.prompts) == (doc["run_id"], 2, 3, ["p1", "p2"])
    assert [len(record.samples.get(("te", p))) for p in ("p1", "p2")] == [3, 3]
    # the reader derives what the runner wrote, and the second run is another run
    assert record.not_comparable_reasons == doc["not_comparable_with_paper"] == [LIMIT_REASON, PROMPTS_REASON]
    assert record.notes == [] and read_run(b).run_id != record.run_id


def _copy(run: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(run, folder)
    return folder


def _edit_line(path: Path, number: int, edit) -> None:
    lines = path.read_text("utf-8").splitlines()
    lines[number - 1] = edit(lines[number - 1])
    path.write_text("\n".join(lines) + "\n", "utf-8")


def _set_first_loglik(value: str):
    def edit(line: str) -> str:
        sample = json.loads(line)
        sample["loglikelihoods"][0] = "@"
        return json.dumps(sample).replace('"@"', value)
    return edit


def _results(folder: Path, edit) -> None:
    doc = json.loads((folder / "results.json").read_text("utf-8"))
    edit(doc)
    (folder / "results.json").write_text(json.dumps(doc, indent=2), "utf-8")


def damage_nan(folder: Path, other: Path) -> str:
    _edit_line(folder / "samples" / "te_p1.jsonl", 2, _set_first_loglik("NaN"))
    return f"{folder / 'samples' / 'te_p1.jsonl'}:2: key loglikelihoods.0: not a finite number (NaN or Infinity)"


def damage_infinity(folder: Path, other: Path) -> str:
    _edit_line(folder / "samples" / "te_p2.jsonl", 3, _set_first_loglik("-Infinity"))
    return f"{folder / 'samples' / 'te_p2.jsonl'}:3: key loglikelihoods.0: not a finite number (NaN or Infinity)"


def damage_overflow(folder: Path, other: Path) -> str:  # Python's json reads 1e999 as infinity
    _edit_line(folder / "samples" / "te_p2.jsonl", 1, _set_first_loglik("-1e999"))
    return f"{folder / 'samples' / 'te_p2.jsonl'}:1: key loglikelihoods.0: not a finite number (NaN or Infinity)"


def damage_positive_loglik(folder: Path, other: Path) -> str:
    _edit_line(folder / "samples" / "te_p1.jsonl", 2, _set_first_loglik("12.5"))
    return f"{folder / 'samples' / 'te_p1.jsonl'}:2: key loglikelihoods.0: 12.5 is greater than the maximum of 0.0001"


def damage_duplicate_doc(folder: Path, other: Path) -> str:
    path = folder / "samples" / "te_p1.jsonl"
    lines = path.read_text("utf-8").splitlines()
    path.write_text("\n".join([lines[0], lines[1], lines[0]]) + "\n", "utf-8")  # doc 2 replaced by doc 0 again: still n lines
    return f"{path}:3: key doc_id: document 0 appears again (first on line 1); each document is scored once per prompt"


def damage_other_runs_samples(folder: Path, other: Path) -> str:
    shutil.copy(other / "samples" / "te_p2.jsonl", folder / "samples" / "te_p2.jsonl")
    theirs = json.loads((other / "results.json").read_text("utf-8"))["run_id"]
    ours = json.loads((folder / "results.json").read_text("utf-8"))["run_id"]
    return (f"{folder / 'samples' / 'te_p2.jsonl'}:1: key run_id: {theirs!r} is another run's (the results.json beside it "
            f"is run {ours}): a samples file of another run placed in this folder")


def damage_other_task_version(folder: Path, other: Path) -> str:
    """The samples of a run of the same identity (one run id) on another version of the task: its prompt edited."""
    path = folder / "samples" / "te_p2.jsonl"
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    ours = dict(lines[0]["task_version"])
    doc = json.loads((folder / "results.json").read_text("utf-8"))
    assert ours == {"version": doc["task_versions"]["te"]["version"], "prompt": doc["task_versions"]["te"]["prompts"]["p2"]}
    theirs = {**ours, "prompt": "0123456789ab"}
    path.write_text("".join(json.dumps({**line, "task_version": theirs}) + "\n" for line in lines), "utf-8")
    return (f"{path}:1: key task_version: {theirs} is another version of the task than the results.json beside it records "
            f"({ours}): a samples file of another run placed in this folder")


def damage_link_out(folder: Path, other: Path) -> str:
    outside = folder.parent / "elsewhere.jsonl"
    shutil.move(folder / "samples" / "te_p1.jsonl", outside)
    (folder / "samples" / "te_p1.jsonl").symlink_to(outside)
    return (f"{folder / 'samples' / 'te_p1.jsonl'}: a symbolic link to {outside.resolve()}, outside the run folder {folder}; "
            "copy the file instead")


def damage_newer_version(folder: Path, other: Path) -> str:
    _results(folder, lambda d: d.update(format_version=3))
    return f"{folder / 'results.json'}: key format_version: 3 is newer than this evalita-eval reads (up to 2); upgrade evalita-llm to read it"


def damage_missing_key(folder: Path, other: Path) -> str:
    _results(folder, lambda d: d.pop("run_id"))
    return f"{folder / 'results.json'}: key run_id: missing, a required key of format_version 2"


def damage_misspelt_config_key(folder: Path, other: Path) -> str:
    _results(folder, lambda d: d["config"].update(num_fewshots=5))
    return (f"{folder / 'results.json'}: key config: Additional properties are not allowed ('num_fewshots' was "
            "unexpected)")


def damage_nan_score(folder: Path, other: Path) -> str:
    doc = json.loads((folder / "results.json").read_text("utf-8"))
    doc["results"]["te"]["p1"]["acc"] = "@"
    text = json.dumps(doc, indent=2).replace('"@"', "NaN")
    (folder / "results.json").write_text(text, "utf-8")
    line = next(i for i, x in enumerate(text.splitlines(), 1) if "NaN" in x)
    return f"{folder / 'results.json'}:{line}: key results.te.p1.acc: not a finite number (NaN or Infinity)"


def damage_count(folder: Path, other: Path) -> str:
    _results(folder, lambda d: d["results"]["te"]["p1"].update(n="3"))
    return f"{folder / 'results.json'}: key results.te.p1.n: '3' is not of type 'integer'"


def damage_edited_score(folder: Path, other: Path) -> str:
    """A score edited by hand, its samples unchanged (issue 45): recomputed from them as compare does, it disagrees."""
    recorded = json.loads((folder / "results.json").read_text("utf-8"))["results"]["te"]["p1"]["acc"]
    _results(folder, lambda d: d["results"]["te"]["p1"].update(acc=0.99))
    return f"{folder / 'results.json'}: key results.te.p1.acc: recorded 0.99, but te_p1.jsonl gives {recorded!r}: a score edited after the run"


def damage_undeclared_metric(folder: Path, other: Path) -> str:
    _results(folder, lambda d: d["results"]["te"]["p1"].update(zzz_acc=0.5))
    return f"{folder / 'results.json'}: key results.te.p1.zzz_acc: task te declares no metric 'zzz_acc'; it declares acc, acc_norm, acc_bytes"


def damage_edited_identity(folder: Path, other: Path) -> str:
    """config.limit and run_identity.limit both edited to null: believed, the 3-item run would be the paper's evaluation."""
    doc = json.loads((folder / "results.json").read_text("utf-8"))
    _results(folder, lambda d: [d["config"].update(limit=None), d["run_identity"].update(limit=None)])
    edited = run_id({**doc["run_identity"], "limit": None})
    return f"{folder / 'results.json'}: key run_identity: hashes to {edited}, not to the run id {doc['run_id']}: edited after the run"


def damage_edited_config(folder: Path, other: Path) -> str:
    rid = json.loads((folder / "results.json").read_text("utf-8"))["run_id"]
    _results(folder, lambda d: d["config"].update(limit=None))
    return f"{folder / 'results.json'}: key config.limit: None, but the run identity (run {rid}) records 3: edited after the run"


def damage_duplicate_key(folder: Path, other: Path) -> str:
    path = folder / "results.json"
    path.write_text(path.read_text("utf-8").replace('"limit": 3', '"limit": 3, "limit": null', 1), "utf-8")
    return f"{path}: key limit: given twice in one object (read, the last would win in silence); each key is given once"


def damage_deep_results(folder: Path, other: Path) -> str:
    path = folder / "results.json"
    path.write_text(path.read_text("utf-8").replace('"status"', f'"deep": {"[" * 100_000}{"]" * 100_000}, "status"', 1), "utf-8")
    return f"{path}: nested too deeply to be read (arrays or objects inside each other)"


def damage_deep_sample(folder: Path, other: Path) -> str:
    path = folder / "samples" / "te_p2.jsonl"
    _edit_line(path, 2, lambda line: line[:-1] + f', "deep": {"[" * 100_000}{"]" * 100_000}}}')
    return f"{path}:2: nested too deeply to be read (arrays or objects inside each other)"


def damage_name_with_a_heading(folder: Path, other: Path) -> str:
    _results(folder, lambda d: d["model"].update(name="tiny\n# Best model | 99.00 |"))
    return (f"{folder / 'results.json'}: key model.name 'tiny\\n# Best model | 99.00 |': expected a non-empty name on one line "
            "(at most 200 characters)")


@pytest.mark.parametrize("damage", [damage_nan, damage_infinity, damage_overflow, damage_positive_loglik, damage_duplicate_doc,
                                    damage_other_runs_samples, damage_other_task_version, damage_link_out, damage_newer_version, damage_missing_key,
                                    damage_misspelt_config_key,
                                    damage_nan_score, damage_count, damage_edited_score, damage_undeclared_metric, damage_edited_identity,
                                    damage_edited_config, damage_duplicate_key, damage_deep_results, damage_deep_sample,
                                    damage_name_with_a_heading])
def test_a_damaged_record_is_one_line_and_exit_1(runs: tuple[Path, Path], tmp_path: Path, damage) -> None:
    folder = _copy(runs[0], tmp_path)
    expected = damage(folder, runs[1])
    proc = cli("report", str(folder), "--out", str(tmp_path / "rep"), "--bootstrap", "0")
    assert proc.returncode == 1 and proc.stderr == f"error: {expected}\n", proc.stderr
    assert not (tmp_path / "rep" / "report.md").exists()  # nothing computed from it


def test_compare_and_export_eee_refuse_the_same_damage(runs: tuple[Path, Path], tmp_path: Path) -> None:
    folder = _copy(runs[0], tmp_path)
    expected = damage_positive_loglik(folder, runs[1])
    proc = cli("compare", str(folder), str(runs[1]))
    assert proc.returncode == 1 and proc.stderr == f"error: {expected}\n", proc.stderr
    proc = cli("export-eee", str(folder), str(tmp_path / "eee"))
    assert proc.returncode == 1 and proc.stderr == f"error: {expected}\n", proc.stderr


@pytest.mark.parametrize("damage", [damage_edited_score, damage_undeclared_metric, damage_edited_identity, damage_name_with_a_heading])
def test_every_reader_refuses_what_the_record_does_not_rest_on(runs: tuple[Path, Path], tmp_path: Path, damage) -> None:
    """Scores derived from the samples, the identity re-hashed, the name checked: compare, push-results (card, front page)
    and export-eee refuse as report does, and write nothing (issue 45)."""
    folder = _copy(runs[0], tmp_path)
    expected = damage(folder, runs[1])
    for command in (["compare", str(folder), str(runs[1])], ["export-eee", str(folder), str(tmp_path / "eee")],
                    ["push-results", str(folder), "--repo", "me/results", "--to-dir", str(tmp_path / "repo")]):
        proc = cli(*command)
        assert proc.returncode == 1 and proc.stderr == f"error: {expected}\n", (command[0], proc.stderr)
    assert not (tmp_path / "eee").exists() and not (tmp_path / "repo").exists()


def test_a_published_run_is_read_back_with_its_own_run_id(runs: tuple[Path, Path], tmp_path: Path) -> None:
    """Published, a local model's identity holds its name, not its path: its run id is that identity's hash, in
    results.json and every sample line, so the published run reads back as any other."""
    proc = cli("push-results", str(runs[0]), "--repo", "me/results", "--to-dir", str(tmp_path / "repo"))
    assert proc.returncode == 0, proc.stderr
    folder = next((tmp_path / "repo").glob("*/*/results.json")).parent
    doc = json.loads((folder / "results.json").read_text("utf-8"))
    local = json.loads((runs[0] / "results.json").read_text("utf-8"))
    assert doc["run_identity"] != local["run_identity"] and doc["run_id"] == run_id(doc["run_identity"]) != local["run_id"]
    assert {json.loads(line)["run_id"] for path in (folder / "samples").glob("*.jsonl") for line in path.read_text("utf-8").splitlines()} == {doc["run_id"]}
    record = read_run(folder)
    assert record.results == read_run(runs[0]).results
    assert cli("report", str(folder), "--out", str(tmp_path / "rep"), "--bootstrap", "0").returncode == 0


def test_an_older_record_is_read_through_its_migration(runs: tuple[Path, Path], tmp_path: Path) -> None:
    """Version 0 (no format_version, sample lines without run_id, no recorded budgets) still reads, the same numbers."""
    folder = _copy(runs[0], tmp_path)
    _as_version_0(folder)
    old, new = read_run(folder), read_run(runs[0])
    assert old.format_version == 0 and old.results == new.results and old.not_comparable_reasons == new.not_comparable_reasons
    assert old.samples.get(("te", "p1")) == new.samples.get(("te", "p1"))  # the migration gives each line the run's id


def _as_version_0(folder: Path) -> None:
    _results(folder, lambda d: [d.pop("format_version"), [t.pop("max_new_tokens") for t in d["task_versions"].values()]])
    for path in (folder / "samples").glob("*.jsonl"):
        lines = [json.loads(x) for x in path.read_text("utf-8").splitlines()]
        path.write_text("".join(json.dumps({k: v for k, v in s.items() if k != "run_id"}) + "\n" for s in lines), "utf-8")


def test_a_run_resumed_over_an_older_record_writes_the_current_one(runs: tuple[Path, Path], tmp_path: Path, tiny_model: Path) -> None:
    """The same run extended with another task over a version-0 folder: the kept task's samples take the run id."""
    folder = _copy(runs[0], tmp_path)
    _as_version_0(folder)
    _run(tiny_model, folder, tasks="wic")
    record = read_run(folder)
    assert (record.format_version, sorted(record.results)) == (FORMAT_VERSION, ["te", "wic"])
    assert {s["run_id"] for p in ("p1", "p2") for s in record.samples.get(("te", p))} == {record.run_id}


def test_a_hand_edited_comparability_flag_changes_nothing(runs: tuple[Path, Path], tmp_path: Path) -> None:
    """A --limit 3 run edited to say it is comparable: report and push-results still say why it is not, and note the edit."""
    folder = _copy(runs[0], tmp_path)
    _results(folder, lambda d: d.update(comparable_with_paper=True, not_comparable_with_paper=[]))
    reasons = f"no: {LIMIT_REASON}; {PROMPTS_REASON}"
    note = ("results.json says comparable_with_paper: true, but its recorded config says no: "
            "the value recomputed from the config is shown")
    proc = cli("report", str(folder), "--out", str(tmp_path / "rep"), "--bootstrap", "0")
    assert proc.returncode == 0, proc.stderr
    md = (tmp_path / "rep" / "report.md").read_text("utf-8")
    assert f"| {reasons} |" in md and f"not comparable with the paper: {LIMIT_REASON}; {PROMPTS_REASON}" in md
    assert sum(line.endswith(note) for line in md.splitlines()) == 1
    env = {"PATH": os.environ["PATH"], "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    pushed = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "push-results", str(folder), "--repo", "me/results",
                             "--to-dir", str(tmp_path / "repo")], capture_output=True, text=True, env=env)
    assert pushed.returncode == 0, pushed.stderr
    assert f"note: {folder / 'results.json'}: {note}" in pushed.stdout.splitlines()
    card = next((tmp_path / "repo").glob("*/*/README.md")).read_text("utf-8")
    assert f"| comparable with the paper | {reasons} |" in card and "(not comparable with the paper)\n" in card
    assert f"Note: {note}" in card
    front = (tmp_path / "repo" / "README.md").read_text("utf-8")
    assert "no: run with --limit 3" in front  # no model page for it


RECORD_V1 = TEST_DATA / "record_v1"  # a run of format_version 1, written by the runner before format 2 (te, ner; --limit 3)


def test_a_format_1_record_is_read_and_written_again_as_format_2(tmp_path: Path) -> None:
    record = read_run(RECORD_V1)
    doc = json.loads((RECORD_V1 / "results.json").read_text("utf-8"))
    assert (record.format_version, record.run_id, record.status) == (1, doc["run_id"], "complete")
    assert record.results == doc["results"] and record.not_comparable_reasons == doc["not_comparable_with_paper"]
    assert record.notes == [] and record.model.files_sha256 == doc["model"]["files_sha256"]
    again = record.to_json()
    assert again["format_version"] == 2 and again["results"] == doc["results"] and again["run_identity"] == doc["run_identity"]
    # the same keys, values unchanged where set (format 2 leaves out a backend's model key whose value is null)
    assert again["config"] == doc["config"] and set(again) == set(doc)
    assert {k: v for k, v in doc["model"].items() if v is not None} == {k: v for k, v in again["model"].items() if v is not None}
    assert again["model"]["revision"] is None and "revision" in doc["model"]
    folder = tmp_path / "v1"
    shutil.copytree(RECORD_V1, folder)
    proc = cli("report", str(folder), "--out", str(tmp_path / "rep"), "--bootstrap", "0")
    assert proc.returncode == 0, proc.stderr


def test_a_record_with_a_misspelt_key_is_never_written(tmp_path: Path) -> None:
    from evalita_eval.record import RecordError
    from evalita_eval.running.results_file import write_results_file

    record = read_run(RECORD_V1)
    record.path = tmp_path / "results.json"
    record.config.num_fewshot = "zero"  # a wrong type
    with pytest.raises(RecordError, match=r"results.json: key config.num_fewshot: 'zero' is not of type"):
        write_results_file(record)
    record = read_run(RECORD_V1)
    record.path = tmp_path / "results.json"
    record.model.options = {"gguf_file": None}
    record.config.chat_template = {"source": "tokenizer", "sha265": "ab"}  # misspelt inside a closed section
    with pytest.raises(RecordError, match=r"key config.chat_template: Additional properties are not allowed \('sha265'"):
        write_results_file(record)
    assert not (tmp_path / "results.json").exists()

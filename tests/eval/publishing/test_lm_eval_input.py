"""lm-eval output folders as input of `report` and `compare`: lm-eval 0.4.13 runs the tasks of
`export-lm-eval` with --log_samples; `report` reads that folder and gets the per-prompt scores of our
own run of the same model on the same items, and `compare` of the two finds no item that differs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evalita_eval.reporting.lm_eval_tasks import entry_and_prompt
from publish_fixtures import sample_build  # noqa: F401 - fixture
from test_export_lm_eval import cli, offline_env

LIMIT = 2  # the sample build has 2 test items of te
MAX_NEW = 3
ENTRIES = ("te", "ner_adg")  # one multiple-choice task (6 prompts), one generative (2 prompts)


def test_task_names_of_both_families() -> None:
    assert entry_and_prompt("evalita-mp_te_prompt-3") == ("te", "p3")
    assert entry_and_prompt("evalita-mp_re_prompt-2") == ("rel", "p2")
    assert entry_and_prompt("evalita-mp_ner_fic_p1") == ("ner_fic", "p1")
    assert entry_and_prompt("evalita-sp_sum_task_fp-small_p2") == ("sum", "p2")
    assert entry_and_prompt("evalita-llm_ner_wn_p2") == ("ner_wn", "p2")
    assert entry_and_prompt("evalita-mp_te") is None and entry_and_prompt("mmlu_abstract_algebra") is None


@pytest.fixture(scope="module")
def two_runs(sample_build: Path, tiny_model: Path, tmp_path_factory) -> tuple[Path, Path]:  # noqa: F811
    pytest.importorskip("lm_eval")
    tmp = tmp_path_factory.mktemp("lm-eval-input")
    env = offline_env(tmp)
    pushed = tmp / "pushed"
    assert cli("evalita_data.cli", ["push", "--build", str(sample_build), "--to-dir", str(pushed)], env).returncode == 0
    tasks = tmp / "tasks"
    assert cli("evalita_eval.cli", ["export-lm-eval", str(tasks), "--data-dir", str(pushed)], env).returncode == 0
    names = [f"evalita-llm_{e}_{p}" for e, n in (("te", 6), ("ner_adg", 2)) for p in (f"p{i}" for i in range(1, n + 1))]
    proc = cli("lm_eval", ["--model", "hf", "--model_args", f"pretrained={tiny_model},dtype=float32", "--device", "cpu",
                           "--include_path", str(tasks), "--tasks", ",".join(names), "--limit", str(LIMIT),
                           "--gen_kwargs", f"max_gen_toks={MAX_NEW}", "--log_samples", "--output_path", str(tmp / "lm")],
               env, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ours = tmp / "ours"
    proc = cli("evalita_eval.cli", ["run", "--model", str(tiny_model), "--data", str(pushed), "--dtype", "float32",
                                    "--tasks", ",".join(ENTRIES), "--limit", str(LIMIT), "--max-new-tokens", str(MAX_NEW),
                                    "--output-dir", str(ours)], env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return tmp / "lm", ours


def _prompt_scores(report_json: Path) -> dict:
    doc = json.loads(report_json.read_text("utf-8"))
    return {task: {k: v for k, v in t.items() if k in ("metric", "prompts", "scores")} for task, t in doc["tasks"].items()}


def test_report_of_an_lm_eval_folder_equals_our_run(two_runs, tmp_path: Path) -> None:
    lm, ours = two_runs
    env = offline_env(tmp_path)
    for name, run in (("theirs", lm), ("mine", ours)):
        proc = cli("evalita_eval.cli", ["report", str(run), "--out", str(tmp_path / name), "--bootstrap", "20"], env)
        assert proc.returncode == 0, proc.stderr[-3000:]
    theirs, mine = _prompt_scores(tmp_path / "theirs" / "report.json"), _prompt_scores(tmp_path / "mine" / "report.json")
    assert set(theirs) == {"te", "ner_adg"} and theirs == mine
    assert len(theirs["te"]["prompts"]) == 6 and len(theirs["ner_adg"]["prompts"]) == 2
    md = (tmp_path / "theirs" / "report.md").read_text("utf-8")
    assert "read from the lm-eval 0.4.13 output" in md and "recomputed from its per-sample records" in md
    assert "Combined Performance Score (CPS)" in md and "(TE, AT, FAQ: 3 of 10)" in md
    # what lm-eval recorded that changes a number, read from its own results file (not a temporary copy)
    [results] = list(lm.glob("*/results_*.json"))
    [model] = json.loads((tmp_path / "theirs" / "report.json").read_text("utf-8"))["models"].values()
    assert model["results_file"] == str(results) and model["model"]["dtype"] == "float32"
    models = md.split("## Models", 1)[1].split("\n## ", 1)[0]  # one row per detail, one column per model
    details = {cells[0]: cells[1:] for line in models.splitlines() if line.startswith("| ")
               for cells in [[c.strip() for c in line.strip().strip("|").split("|")]]}
    assert (details["results file"], details["dtype"], details["device"], details["limit"]) == ([str(results)], ["float32"], ["cpu"], [str(LIMIT)])
    assert (f"--limit {LIMIT}: only the first {LIMIT} items of each task; "
            in details["comparable with the paper"][0])
    assert (f"lm-eval --gen_kwargs max_gen_toks={MAX_NEW}: the tasks' generation arguments were changed"
            in details["comparable with the paper"][0])


def test_compare_pairs_an_lm_eval_run_with_ours_by_document(two_runs, tmp_path: Path) -> None:
    lm, ours = two_runs
    # lm-eval's items numbered the other way round (doc_id is a position in its own split): paired by the document
    shuffled = tmp_path / "lm"
    shutil.copytree(lm, shuffled)
    for path in shuffled.glob("*/samples_*.jsonl"):
        records = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
        assert sorted(r["doc_id"] for r in records) == list(range(LIMIT))
        path.write_text("".join(json.dumps({**r, "doc_id": LIMIT - 1 - r["doc_id"]}) + "\n" for r in records), "utf-8")
    proc = cli("evalita_eval.cli", ["compare", str(shuffled), str(ours), "--out", str(tmp_path / "cmp"), "--bootstrap", "50"],
               offline_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    payload = json.loads((tmp_path / "cmp" / "compare.json").read_text("utf-8"))
    rows = payload["comparisons"]
    assert len(rows) == 10, payload["notes"]
    assert len(rows) == 6 + 1 + 2 + 1  # te: 6 prompts + AvgP; ner_adg: 2 prompts + AvgP
    assert all(r["difference"] == 0 for r in rows)
    assert all(r["differing"] == 0 and r["n"] == LIMIT for r in rows if r["prompt"] != "AvgP")
    assert f"items with another prediction in A than in B: 0 of {8 * LIMIT} (over 8 task-prompt pair(s))" in payload["notes"]


def test_what_cannot_be_read_is_one_line(two_runs, tmp_path: Path) -> None:
    lm, _ours = two_runs
    env = offline_env(tmp_path)
    no_samples = tmp_path / "no-samples"
    shutil.copytree(lm, no_samples)
    for path in no_samples.glob("*/samples_*.jsonl"):
        path.unlink()
    proc = cli("evalita_eval.cli", ["report", str(no_samples), "--out", str(tmp_path / "r")], env)
    assert proc.returncode == 1
    assert "no samples_<task>_*.jsonl of evalita-llm_ner_adg_p1, evalita-llm_ner_adg_p2, evalita-llm_te_p1" in proc.stderr
    assert "(run lm-eval with --log_samples)" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    other = tmp_path / "other"
    [results] = list(lm.glob("*/results_*.json"))
    (other / "m").mkdir(parents=True)
    doc = json.loads(results.read_text("utf-8"))
    doc["results"] = {"mmlu_abstract_algebra": {"acc,none": 0.3}}
    doc["configs"] = {}
    (other / "m" / results.name).write_text(json.dumps(doc), "utf-8")
    proc = cli("evalita_eval.cli", ["report", str(other), "--out", str(tmp_path / "r2")], env)
    assert proc.returncode == 1 and "no Evalita-LLM task (evalita-mp_* or evalita-llm_*) among mmlu_abstract_algebra" in proc.stderr


def test_report_names_lm_evals_group_acc_beside_the_benchmarks_score(two_runs, tmp_path: Path) -> None:
    lm, _ours = two_runs
    copy = tmp_path / "lm"
    shutil.copytree(lm, copy)
    [results] = list(copy.glob("*/results_*.json"))
    doc = json.loads(results.read_text("utf-8"))
    doc["results"]["evalita-mp"] = {"alias": "Evalita-LLM", "acc,none": 0.5, "acc_stderr,none": 0.1}
    results.write_text(json.dumps(doc), "utf-8")
    proc = cli("evalita_eval.cli", ["report", str(copy), "--out", str(tmp_path / "r"), "--bootstrap", "0"], offline_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    notes = json.loads((tmp_path / "r" / "report.json").read_text("utf-8"))["notes"]
    assert any("lm-eval's own `evalita-mp` acc of this run is 50.00; the report's per-task CPS below are the benchmark's figures"
               in n for n in notes)
    assert not any("evalita-mp" in n and "left out" in n for n in notes)  # the group is no task: not reported as unknown

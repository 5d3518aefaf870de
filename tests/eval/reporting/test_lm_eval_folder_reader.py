"""What `report` and `compare` believe of an lm-eval output folder (issue 36): hand-built lm-eval 0.4.13 folders
(lm_eval_folders.py), each damaged in one way, read through the real CLI. A damaged folder is one line
(exit 1, the file, the line, the doc_id or key named), never a score computed from the damage."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lm_eval_folders import NER, OLDER, STAMP, WIC, clean_samples, results_doc, wic_docs, wic_sample, write_run


def evalita_eval(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_HOME=str(tmp / "hf"), HF_HUB_OFFLINE="1", MPLCONFIGDIR=str(tmp / "mpl"))
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", *args], env=env, capture_output=True, text=True, cwd=tmp)


def report(path: Path, tmp: Path) -> tuple[subprocess.CompletedProcess, dict | None]:
    out = tmp / f"report-{path.name}"
    proc = evalita_eval(["report", str(path), "--out", str(out), "--bootstrap", "0"], tmp)
    return proc, json.loads((out / "report.json").read_text("utf-8")) if proc.returncode == 0 else None


def one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr[-3000:]
    return lines[0]


def test_a_clean_folder_carries_what_lm_eval_recorded(tmp_path: Path) -> None:
    results = write_run(tmp_path / "lm", clean_samples(), limit=3.0, gen_kwargs={"max_gen_toks": 32},
                        model_num_parameters=4321)
    proc, doc = report(tmp_path / "lm", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert doc["tasks"]["wic"]["scores"] == [[pytest.approx(200 / 3)]]  # predictions 0, 1, 1 of gold 0, 0, 1
    assert doc["tasks"]["ner_adg"]["items"]["rows"][0][5] == "p1 1 / 3 (!)"  # one answer outside NER's format
    assert doc["models"]["tiny"]["results_file"] == str(results)  # lm-eval's own file, not a temporary one
    assert doc["models"]["tiny"]["model"]["model_args"] == {"pretrained": "tiny", "dtype": "float32"}
    assert doc["models"]["tiny"]["model"]["num_parameters"] == 4321
    md = (tmp_path / "report-lm" / "report.md").read_text("utf-8")
    details = models_section(md)
    assert (details["dtype"], details["device"], details["limit"]) == (["float32"], ["cpu"], ["3"])  # limit an int, not 3.0
    assert details["comparable with the paper"] == [
        "no: --limit 3: only the first 3 items of each task; --max-new-tokens 32: the generation budget was changed; "
        "lm-eval --gen_kwargs max_gen_toks=32: the tasks' generation arguments were changed; prompts left out: ner_adg p2, "
        "wic p2, wic p3, wic p4, wic p5, wic p6"]


# The CLI under an audit hook that names every temporary file or folder made (Python's tempfile raises these events).
AUDITED_CLI = ("import runpy, sys\n"
               "sys.addaudithook(lambda event, args: event.startswith('tempfile.mk') and print('TEMPFILE', event, *args, file=sys.stderr))\n"
               "sys.argv = ['evalita-eval', *sys.argv[1:]]\n"
               "runpy.run_module('evalita_eval.cli', run_name='__main__')\n")


def test_a_folder_is_read_in_memory_without_temporary_files(tmp_path: Path) -> None:
    write_run(tmp_path / "lm", clean_samples())
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1", MPLCONFIGDIR=str(tmp_path / "mpl"), TMPDIR=str(temp))
    proc = subprocess.run([sys.executable, "-c", AUDITED_CLI, "report", str(tmp_path / "lm"), "--out", str(tmp_path / "out"),
                           "--bootstrap", "20"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "out" / "report.json").read_text("utf-8"))["tasks"]["wic"]["scores"] == [[pytest.approx(200 / 3)]]
    # The converted samples are the record's own: none written to be read back, nothing made in TMPDIR nor left there.
    assert [line for line in proc.stderr.splitlines() if line.startswith("TEMPFILE")] == [] and sorted(temp.iterdir()) == []


def models_section(md: str) -> dict[str, list[str]]:
    """The report's Models section (markdown: one row per detail, one column per model): detail -> values."""
    part = md.split("## Models", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in part.splitlines() if line.startswith("| ")]
    return {cells[0]: cells[1:] for cells in rows}


@pytest.mark.parametrize("key,value", [("filtered_resps", "nan"), ("filtered_resps", "Infinity"), ("filtered_resps", "12.5"),
                                       ("resps", "12.5")])
def test_a_log_likelihood_that_is_none_is_refused(tmp_path: Path, key: str, value: str) -> None:
    samples = clean_samples()
    damaged = samples[WIC][1]
    if key == "resps":
        damaged["resps"][0][0][0] = value
    else:
        damaged["filtered_resps"][0][0] = value
    write_run(tmp_path / "lm", samples)
    where = "resps[0][0][0]" if key == "resps" else "filtered_resps[0][0]"
    expected = (f"samples_{WIC}_{STAMP}.jsonl:2: doc_id 1: {where} is {value!r}, not a log-likelihood (a finite number ≤ 0); "
                "not an lm-eval sample of wic p1")
    assert one_line(report(tmp_path / "lm", tmp_path)[0]).endswith(expected)
    write_run(tmp_path / "clean", clean_samples())
    proc = evalita_eval(["compare", str(tmp_path / "lm"), str(tmp_path / "clean"), "--out", str(tmp_path / "cmp")], tmp_path)
    assert one_line(proc).endswith(expected) and not (tmp_path / "cmp" / "compare.json").exists()


@pytest.mark.parametrize("reused", [False, True])
def test_a_document_logged_twice_is_refused(tmp_path: Path, reused: bool) -> None:
    samples = clean_samples()
    again = dict(samples[WIC][0])
    if reused:  # doc_id 0 given to the third document
        again = wic_sample(0, wic_docs()[2], (-0.1, -3.0))
    samples[WIC].append(again)
    write_run(tmp_path / "lm", samples)
    what = "another document (a different doc)" if reused else "the same document again"
    assert one_line(report(tmp_path / "lm", tmp_path)[0]).endswith(
        f"samples_{WIC}_{STAMP}.jsonl:4: doc_id 0 logged twice (first at line 1, here {what}); each document once per "
        "samples file: not scored")


def test_a_run_without_samples_lends_nothing_to_an_older_one(tmp_path: Path) -> None:
    folder = tmp_path / "lm"
    older = write_run(folder, clean_samples(), stamp=OLDER, version="0.4.12")
    newer = folder / "tiny" / f"results_{STAMP}.json"
    newer.write_text(json.dumps(results_doc([WIC, NER], model="another-model", shots=5)), "utf-8")
    line = one_line(report(folder, tmp_path)[0])
    assert line == (f"error: {folder}: 2 lm-eval runs ({OLDER}, {STAMP}); name one by its results file, e.g. {newer}")
    proc, doc = report(older, tmp_path)  # the older run, named: its own model, shots and lm-eval version
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert list(doc["models"]) == ["tiny"] and doc["models"]["tiny"]["results_file"] == str(older)
    assert any("read from the lm-eval 0.4.12 output" in n for n in doc["notes"])
    md = (tmp_path / f"report-{older.name}" / "report.md").read_text("utf-8")
    details = models_section(md)
    assert [details[k] for k in ("name_or_path", "dtype", "device", "setting", "few-shot")] == [["tiny"], ["float32"], ["cpu"], ["loglikelihood"], ["0"]]
    assert one_line(report(newer, tmp_path)[0]) == (
        f"error: {folder / 'tiny'}: no samples_<task>_*.jsonl of {NER}, {WIC} of the run of {newer.name} "
        "(run lm-eval with --log_samples): those prompts are left out")


@pytest.mark.parametrize("linked", ["samples", "results"])
def test_a_link_leaving_the_folder_is_refused(tmp_path: Path, linked: str) -> None:
    outside = tmp_path / "elsewhere"
    results = write_run(outside, clean_samples())
    folder = tmp_path / "lm"
    shutil.copytree(outside, folder)
    name = results.name if linked == "results" else f"samples_{WIC}_{STAMP}.jsonl"
    (folder / "tiny" / name).unlink()
    (folder / "tiny" / name).symlink_to(outside / "tiny" / name)
    assert one_line(report(folder, tmp_path)[0]).endswith(
        f"{folder / 'tiny' / name}: a link to {(outside / 'tiny' / name).resolve()}, outside {folder}; "
        "not read (copy the file into the folder)")


@pytest.mark.parametrize("key,value,expected", [
    ("limit", 2.5, "config.limit is 2.5: neither a count of items nor a share below 1"),
    ("gen_kwargs", "max_gen_toks=abc", "config.gen_kwargs.max_gen_toks: Input should be a valid integer, unable to parse string as an integer"),
    ("model_args", 7, "config.model_args: Input should be a valid string; expected the results JSON of lm-eval"),
    ("model_num_parameters", "135M", "config.model_num_parameters: Input should be a valid integer; expected the results "
                                     "JSON of lm-eval"),
])
def test_a_damaged_results_file_is_one_line(tmp_path: Path, key: str, value: object, expected: str) -> None:
    results = write_run(tmp_path / "lm", clean_samples())
    doc = json.loads(results.read_text("utf-8"))
    doc["config"][key] = value
    results.write_text(json.dumps(doc), "utf-8")
    assert one_line(report(tmp_path / "lm", tmp_path)[0]) == f"error: {results}: {expected}"


def test_a_sample_of_another_shape_is_one_line(tmp_path: Path) -> None:
    samples = clean_samples()
    del samples[WIC][1]["filtered_resps"]
    write_run(tmp_path / "lm", samples)
    assert one_line(report(tmp_path / "lm", tmp_path)[0]).endswith(
        f"samples_{WIC}_{STAMP}.jsonl:2: not an lm-eval sample (filtered_resps: Field required)")


def test_a_generation_that_is_no_text_is_one_line(tmp_path: Path) -> None:
    samples = clean_samples()
    samples[NER][0]["filtered_resps"] = [["Mario Rossi$PER"]]
    write_run(tmp_path / "lm", samples)
    assert one_line(report(tmp_path / "lm", tmp_path)[0]).endswith(
        f"samples_{NER}_{STAMP}.jsonl:1: doc_id 0: filtered_resps is not [the generated text]; not an lm-eval sample of ner_adg p1")


def test_a_number_lm_eval_computes_by_another_rule_is_noted_beside_ours(tmp_path: Path) -> None:
    """WiC: lm-eval logs binary F1 (here 50.00), the report shows macro F1 (66.67) and says both in a note."""
    results = write_run(tmp_path / "lm", clean_samples())
    doc = json.loads(results.read_text("utf-8"))
    doc["results"][WIC]["f1,none"] = 0.5
    results.write_text(json.dumps(doc), "utf-8")
    proc, report_doc = report(tmp_path / "lm", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report_doc["tasks"]["wic"]["scores"] == [[pytest.approx(200 / 3)]]
    note = (f"{WIC}: lm-eval's own f1 is 50.00; the report shows f1_macro 66.67, recomputed from the same samples "
            "by this tool's rule")
    assert note in report_doc["notes"]
    assert note in (tmp_path / "report-lm" / "report.md").read_text("utf-8")


def test_a_share_of_the_items_is_said_as_a_share(tmp_path: Path) -> None:
    """lm-eval's --limit below 1 is a share of each task's items: said once, never as 'the first 0.5 items'."""
    write_run(tmp_path / "lm", clean_samples(), limit=0.5)
    proc, _doc = report(tmp_path / "lm", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    comparable = models_section((tmp_path / "report-lm" / "report.md").read_text("utf-8"))["comparable with the paper"]
    assert comparable == ["no: --limit 0.5: only that share of each task's items; prompts left out: ner_adg p2, "
                          "wic p2, wic p3, wic p4, wic p5, wic p6"]

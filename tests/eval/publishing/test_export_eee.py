"""`evalita-eval export-eee`: a run in the Every Eval Ever schema, validated against the schema files kept in the package."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from jsonschema import Draft7Validator

from evalita_eval.cli import main
from evalita_eval.publishing.export_eee import SCHEMAS, validate

from paths import TEST_DATA

RUN = TEST_DATA / "results" / "beta"


def _schema(name: str) -> Draft7Validator:
    return Draft7Validator(json.loads((SCHEMAS / name).read_text("utf-8")))


def _export(run: Path, out: Path) -> list[Path]:
    res = CliRunner().invoke(main, ["export-eee", str(run), str(out), "--organization", "Test Lab"])
    assert res.exit_code == 0, res.output
    return sorted(p for p in out.rglob("*") if p.is_file())


def test_export_eee_validates_and_carries_every_score(tmp_path: Path) -> None:
    assert "`every-eval-ever` 0.3.0 package" in (SCHEMAS / "SOURCE.md").read_text("utf-8")
    assert json.loads((SCHEMAS / "eval.schema.json").read_text("utf-8"))["version"] == "0.3.0"
    aggregate_path, samples_path = _export(RUN, tmp_path / "a")
    assert aggregate_path.parent == tmp_path / "a" / "data" / "evalita-llm" / "org-b" / "beta-8b"
    aggregate = json.loads(aggregate_path.read_text("utf-8"))
    assert list(_schema("eval.schema.json").iter_errors(aggregate)) == []
    lines = [json.loads(x) for x in samples_path.read_text("utf-8").splitlines()]
    instance = _schema("instance_level_eval.schema.json")
    assert all(list(instance.iter_errors(r)) == [] for r in lines)
    # every samples line of the run once: te and hs have 6 prompts of 60 and 80 items; ner has no samples
    assert len(lines) == 6 * 60 + 6 * 80
    assert aggregate["detailed_evaluation_results"] == {
        "format": "jsonl", "file_path": str(samples_path.relative_to(tmp_path / "a")), "hash_algorithm": "sha256",
        "checksum": hashlib.sha256(samples_path.read_bytes()).hexdigest(), "total_rows": len(lines)}
    assert samples_path.name == aggregate_path.stem + "_samples.jsonl"
    assert aggregate["model_info"]["id"] == "org-b/beta-8b" and aggregate["model_info"]["additional_details"]["revision"] == "v1"
    assert aggregate["source_metadata"]["source_organization_name"] == "Test Lab"
    scores = {r["evaluation_result_id"]: r["score_details"]["score"] for r in aggregate["evaluation_results"]}
    assert scores["te/p1/acc"] == 0.65 and scores["hs/p2/f1_macro"] == pytest.approx(0.6611764705882353)
    assert scores["te/CPS/acc"] == pytest.approx((1 - (0.65 - 0.6055555555555556)) * 0.65)
    # an item: its prediction, gold and correctness as in the run's samples file
    first = json.loads((RUN / "samples" / "te_p1.jsonl").read_text("utf-8").splitlines()[2])
    item = next(r for r in lines if r["evaluation_result_id"] == "te/p1/acc" and r["sample_id"] == "te/2")
    assert (item["evaluation"]["is_correct"], first["prediction"] == first["gold"]) == (False, False)
    assert {r["evaluation_id"] for r in lines} == {aggregate["evaluation_id"]}
    # deterministic: the same run gives the same bytes
    again = _export(RUN, tmp_path / "b")
    assert [p.read_bytes() for p in again] == [aggregate_path.read_bytes(), samples_path.read_bytes()]


def test_export_eee_of_a_local_run_names_no_path_and_errors_are_one_line(tmp_path: Path) -> None:
    run = tmp_path / "where" / "run"
    shutil.copytree(RUN, run)
    doc = json.loads((run / "results.json").read_text("utf-8"))
    doc["model"] = {"name_or_path": str(tmp_path / "where" / "my-model"), "revision": None, "files_sha256": "ab" * 32}
    doc["data"]["source"] = str(tmp_path / "where" / "build")
    (run / "results.json").write_text(json.dumps(doc), "utf-8")
    (tmp_path / "where" / "my-model").mkdir()
    files = _export(run, tmp_path / "out")
    # named by its folder and the first 8 digits of its weights' fingerprint, labelled local, never "huggingface"
    assert files[0].parent.relative_to(tmp_path / "out").as_posix() == "data/evalita-llm/local/my-model-abababab"
    assert not [p for p in files if str(tmp_path).encode() in p.read_bytes()]
    aggregate = json.loads(files[0].read_text("utf-8"))
    assert aggregate["model_info"]["additional_details"]["files_sha256"] == "ab" * 32
    assert aggregate["model_info"]["additional_details"]["model_args"] == "pretrained=my-model-abababab"  # lm-eval's form
    assert (aggregate["model_info"]["id"], aggregate["model_info"]["name"], aggregate["model_info"]["developer"],
            aggregate["model_info"]["inference_platform"]) == ("my-model-abababab", "my-model-abababab", "local", "local")
    with pytest.raises(ValueError, match=r"^x\.json: not valid against eval\.schema\.json at \(top\): 'schema_version' is a required"):
        validate({}, "eval.schema.json", "x.json")
    res = CliRunner().invoke(main, ["export-eee", str(tmp_path / "where"), str(tmp_path / "out")])
    assert res.exit_code == 1 and res.output.strip() == f"error: {tmp_path / 'where' / 'results.json'}: no results.json; expected a folder of `evalita-eval run --output-dir`"


def test_export_eee_speaks_eees_vocabulary(tmp_path: Path) -> None:
    """Canonical metric ids, developer, numeric num_samples, generation_config, sample_hash: the fields EEE joins on."""
    aggregate_path, samples_path = _export(RUN, tmp_path / "a")
    aggregate = json.loads(aggregate_path.read_text("utf-8"))
    assert aggregate["model_info"]["developer"] == "org-b" and "inference_engine" not in aggregate["model_info"]  # no backend recorded
    results = {r["evaluation_result_id"]: r for r in aggregate["evaluation_results"]}
    assert {k: results[k]["metric_config"]["metric_id"] for k in ("te/p1/acc", "hs/p2/f1_macro", "te/CPS/acc")} == {
        "te/p1/acc": "accuracy", "hs/p2/f1_macro": "lm-evaluation-harness.f1_macro", "te/CPS/acc": "evalita-eval.cps_acc"}
    assert results["te/p1/acc"]["metric_config"]["metric_kind"] == "accuracy"
    assert results["hs/p2/f1_macro"]["metric_config"]["additional_details"] == {
        "metric_id_registry_revision": "8b83e9c", "metric_id_status": "unregistered"}
    assert results["te/p1/acc"]["score_details"]["uncertainty"] == {"num_samples": 60}
    assert results["hs/p2/f1_macro"]["score_details"]["uncertainty"] == {"num_samples": 80}
    # beta's results.json predates "asked": the shots and setting only
    assert results["te/p1/acc"]["generation_config"] == {"additional_details": {
        "num_fewshot": "0", "setting": "loglikelihood", "apply_chat_template": "false"}}
    line = next(json.loads(x) for x in samples_path.read_text("utf-8").splitlines() if '"te/2"' in x)
    # EEE's lm-eval converter's hash of (prompt, target): no prompt recorded in beta, gold index 0
    assert line["sample_hash"] == hashlib.sha256(json.dumps({"raw": "", "reference": "0"}, sort_keys=True).encode()).hexdigest()
    assert line["metadata"] == {"doc_id": "2", "prompt": "p1"}


def test_export_eee_of_a_real_run_carries_how_each_task_was_asked(tiny_model: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(TEST_DATA / "build"), "--tasks", "wic,ls",
                                    "--prompts", "p1", "--limit", "2", "--max-new-tokens", "3", "--no-progress", "--output-dir", str(run)])
    assert res.exit_code == 0, res.output
    files = _export(run, tmp_path / "eee")
    aggregate = json.loads(files[0].read_text("utf-8"))
    engine = aggregate["model_info"]["inference_engine"]
    assert engine["name"] == "transformers" and engine["version"] == json.loads((run / "results.json").read_text("utf-8"))["versions"]["transformers"]
    assert aggregate["model_info"]["inference_platform"] == "local"
    configs = {r["evaluation_result_id"]: r["generation_config"] for r in aggregate["evaluation_results"]}
    assert configs["ls/p1/ls_f1"]["generation_args"] == {"temperature": 0.0, "max_tokens": 3}
    assert configs["ls/p1/ls_f1"]["additional_details"]["until"] == '["</s>"]'
    assert configs["wic/p1/acc"] == {"additional_details": {"num_fewshot": "0", "setting": "loglikelihood", "apply_chat_template": "false",
                                                           "request": "loglikelihood"}}
    lines = [json.loads(x) for x in files[1].read_text("utf-8").splitlines()]
    samples = [json.loads(x) for x in (run / "samples" / "wic_p1.jsonl").read_text("utf-8").splitlines()]
    wic = [r for r in lines if r["evaluation_name"] == "wic p1"]
    assert [json.loads(r["metadata"]["loglikelihoods"]) for r in wic] == [s["loglikelihoods"] for s in samples]
    assert [r["evaluation"]["is_correct"] for r in wic] == [s["prediction"] == s["gold"] for s in samples]
    assert [r["input"]["reference"] for r in wic] == [[str(s["gold"])] for s in samples]  # the gold index, as EEE's converter
    assert [r["sample_hash"] for r in wic] == [
        hashlib.sha256(json.dumps({"raw": s["prompt"], "reference": str(s["gold"])}, sort_keys=True).encode()).hexdigest() for s in samples]


def test_eees_own_validator_passes_our_exports(tiny_model: Path, tmp_path: Path) -> None:
    from eee_python import NEEDED, eee_python

    python = eee_python()
    if python is None:
        pytest.skip(f"EEE's validator needs {NEEDED}: none found (set EEE_PYTHON to such a Python)")
    run = tmp_path / "run"
    res = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(TEST_DATA / "build"), "--tasks", "wic,ls",
                                    "--prompts", "p1", "--limit", "2", "--max-new-tokens", "3", "--no-progress", "--output-dir", str(run)])
    assert res.exit_code == 0, res.output
    _export(RUN, tmp_path / "eee")
    files = _export(run, tmp_path / "eee")  # both runs' files
    assert len(files) == 4
    _eees_validator_passes(python, files)


def _eees_validator_passes(python: str, files: list[Path]) -> None:
    proc = subprocess.run([python, "-m", "every_eval_ever", "validate", "--format", "json", *map(str, files)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert len(report) == len(files) and all(r["valid"] and r["errors"] == [] for r in report), report


def test_an_unparsed_generated_answer_is_exported_as_unparsed(tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 45: a CE answer no rule read, or whose trace never ended, has no extracted value and says why; never the
    wrong class the scoring counts in its stead, never "loglikelihood argmax" for a generated setting."""
    from fake_openai_server import FakeServer

    replies = {"banca": ("<think>Vediamo.</think>A", "stop"), "pianta": ("<think>Vediamo.</think>Non saprei proprio.", "stop"),
               "parte": ("<think>Vediamo, forse B", "length")}
    server = FakeServer()
    server.chat_script = lambda body: next({"message": {"role": "assistant", "content": text}, "finish_reason": finish}
                                           for lemma, (text, finish) in replies.items() if f"'{lemma}'" in body["messages"][-1]["content"])
    monkeypatch.setenv("EVALITA_TEST_EEE_KEY", "sk-test")
    try:
        res = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(TEST_DATA / "build"), "--tasks", "wic",
                                        "--setting", "ce", "--prompts", "p1", "--backend", "openai-chat", "--backend-arg", f"base_url={server.url}",
                                        "--backend-arg", "api_key_env=EVALITA_TEST_EEE_KEY", "--backend-arg", "concurrency=1", "--backend-arg", "max_retries=0",
                                        "--thinking", "on", "--no-progress", "--output-dir", str(tmp_path / "run")])
    finally:
        server.stop()
    assert res.exit_code == 0, res.output
    files = _export(tmp_path / "run", tmp_path / "eee")
    lines = sorted((json.loads(x) for x in files[1].read_text("utf-8").splitlines()), key=lambda r: r["sample_id"])
    instance = _schema("instance_level_eval.schema.json")
    assert all(list(instance.iter_errors(r)) == [] for r in lines)
    assert [(r["sample_id"], r["answer_attribution"][0]["extracted_value"], r["answer_attribution"][0]["extraction_method"],
             r["output"]["raw"], r["evaluation"]["is_correct"]) for r in lines] == [
        ("wic/0", "A", "letter", ["A"], True),
        ("wic/1", "", "unparsed: no_option", ["Non saprei proprio."], False),
        ("wic/2", "", "unparsed: reasoning_unfinished", [""], False)]
    from eee_python import eee_python

    if (python := eee_python()) is not None:  # EEE's own validator where it runs (else the test above it says it is skipped)
        _eees_validator_passes(python, files)


@pytest.mark.parametrize("backend", ["openai-chat", "openai-completions"])
def test_a_model_on_an_openai_compatible_server_is_labelled_as_served(backend: str, tiny_model: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 44: a run through an OpenAI-compatible server is exported as such (its engine is the server's, unknown),
    never as run on Hugging Face or a local folder with transformers."""
    from fake_openai_server import FakeServer

    server = FakeServer()
    monkeypatch.setenv("EVALITA_TEST_EEE_KEY", "sk-test")
    try:
        res = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(TEST_DATA / "build"), "--tasks", "wic",
                                        "--prompts", "p1", "--limit", "2", "--setting", "ce", "--backend", backend,
                                        "--backend-arg", f"base_url={server.url}", "--backend-arg", "api_key_env=EVALITA_TEST_EEE_KEY", "--backend-arg", "concurrency=1",
                                        "--backend-arg", "max_retries=0", "--no-progress", "--output-dir", str(tmp_path / "run")])
    finally:
        server.stop()
    assert res.exit_code == 0, res.output
    model_info = json.loads(_export(tmp_path / "run", tmp_path / "eee")[0].read_text("utf-8"))["model_info"]
    assert (model_info["inference_platform"], model_info["additional_details"]["deployment_type"]) == (
        "openai_compatible_api", "externally_managed")
    assert "inference_engine" not in model_info and model_info["additional_details"]["backend"] == backend

"""`evalita-eval export-eee`: a run in the Every Eval Ever schema, validated against the schema files kept in the package."""

from __future__ import annotations

import hashlib
import json
import shutil
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
    assert (aggregate["model_info"]["id"], aggregate["model_info"]["name"], aggregate["model_info"]["developer"],
            aggregate["model_info"]["inference_platform"]) == ("local/my-model-abababab", "my-model-abababab", "local", "local")
    with pytest.raises(ValueError, match=r"^x\.json: not valid against eval\.schema\.json at \(top\): 'schema_version' is a required"):
        validate({}, "eval.schema.json", "x.json")
    res = CliRunner().invoke(main, ["export-eee", str(tmp_path / "where"), str(tmp_path / "out")])
    assert res.exit_code == 1 and res.output.strip() == f"error: {tmp_path / 'where' / 'results.json'}: no results.json; expected a folder of `evalita-eval run --output-dir`"

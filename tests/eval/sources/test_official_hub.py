"""`evalita-eval run --data hf:evalitahf`: the official splits served by the loopback Hub stub."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("huggingface_hub")

from evalita_data.registry import get_task  # noqa: E402
from evalita_eval.sources.official import OfficialSource  # noqa: E402
from evalita_eval.sources.entries import all_entries  # noqa: E402
from official_hub import official_task_ids, serve_official  # noqa: E402
from publish_fixtures import hub, hub_env, sample_build  # noqa: E402,F401 - fixtures


def run_eval(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", *args], env=env, capture_output=True, text=True)


def test_the_registry_declares_the_official_layout() -> None:
    declared = {t: (get_task(t).hub_splits.dataset, get_task(t).hub_splits.test, get_task(t).hub_splits.fewshot) for t in official_task_ids()}
    assert {"wic", "te", "sa", "hs", "faq", "at", "ls", "ner", "rel", "sum"} <= set(declared)  # every built-in task has its copy
    assert declared["faq"] == ("faq", "test_1", "dev_1")
    assert declared["ner"] == ("entity_recognition", "reduced_test", "trial")
    assert declared["sum"] == ("summarization-fp", "test_100", "dev")
    assert declared["hs"] == ("hatespeech_detection", "test_all", "dev")
    assert declared["sa"] == ("sentiment_analysis", "test", "train")
    assert get_task("wic").hub_splits.config == "default"
    source = OfficialSource("evalitahf")
    faq = next(e for e in all_entries() if e.name == "faq")
    ner = next(e for e in all_entries() if e.name == "ner_wn")
    assert (source.official_split(faq, "test"), source.official_split(faq, "dev")) == ("test_1", "dev_1")
    assert (source.official_split(ner, "test"), source.config(ner)) == ("reduced_test", "wn")


def test_run_on_the_official_splits_evaluates_all_ten_tasks(sample_build: Path, hub, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    shas = serve_official(hub, sample_build)
    official = [e.name for e in all_entries() if e.spec.hub_splits is not None]
    assert len(shas) == len({get_task(t).hub_splits.dataset for t in official_task_ids()})
    env = hub_env(hub, tmp_path / "hf")
    out = tmp_path / "run"
    proc = run_eval(["--model", str(tiny_model), "--data", "hf:evalitahf", "--prompts", "p1", "--limit", "2",
                     "--num-fewshot", "1", "--max-new-tokens", "3", "--output-dir", str(out)], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "results.json").read_text("utf-8"))
    assert {"wic", "te", "sa", "hs", "faq", "at", "ls", "ner_adg", "ner_fic", "ner_wn", "rel", "sum"} <= set(official)
    assert sorted(result["results"]) == sorted(official)
    assert all(result["results"][e]["p1"]["n"] == 2 for e in official)
    assert result["data"]["source"] == "hf:evalitahf"
    # the commit of every dataset read, and a hash of the records of both splits used
    assert result["data"]["revisions"] == shas
    assert set(result["data"]["manifest_sha256"]["faq"]) == {"test", "dev"}
    # the hash of what was loaded: one canonical JSON line per record, here the build's FAQ test records
    rows = [json.loads(line) for line in (sample_build / "faq" / "test.jsonl").read_text("utf-8").splitlines()]
    canonical = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode("utf-8")
    assert result["data"]["manifest_sha256"]["faq"]["test"] == hashlib.sha256(canonical).hexdigest()
    # the FAQ test records came from test_1 of the stub: the same rows as our build's test split
    first = json.loads((out / "samples" / "faq_p1.jsonl").read_text("utf-8").splitlines()[0])
    built = json.loads((sample_build / "faq" / "test.jsonl").read_text("utf-8").splitlines()[0])
    assert built["question"] in first["prompt"]


def test_a_record_that_breaks_the_schema_is_refused(sample_build: Path, hub, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    def break_row(config: str, split: str, records: list[dict]) -> list[dict]:
        if split == "test":
            records = [dict(r) for r in records]
            records[1]["entailment"] = "FORSE"
        return records

    serve_official(hub, sample_build, tasks=["te"], org="broken", edit=break_row)
    env = hub_env(hub, tmp_path / "hf")
    proc = run_eval(["--model", str(tiny_model), "--data", "hf:broken", "--tasks", "te", "--prompts", "p1", "--limit", "1",
                     "--output-dir", str(tmp_path / "run")], env)
    assert proc.returncode == 1
    assert "broken/textual_entailment split test row 1: does not match the te schema: entailment:" in proc.stderr
    assert "FORSE" in proc.stderr
    assert not (tmp_path / "run" / "results.json").exists()


def test_a_missing_official_dataset_is_a_clear_error(hub, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    env = hub_env(hub, tmp_path / "hf")
    proc = run_eval(["--model", str(tiny_model), "--data", "hf:nobody", "--tasks", "faq", "--output-dir", str(tmp_path / "run")], env)
    assert proc.returncode == 1
    assert "faq: cannot read nobody/faq split test_1" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_eval(["--model", str(tiny_model), "--data", "hf:", "--output-dir", str(tmp_path / "run")], env)
    assert proc.returncode == 2 and "hf:ORG needs a Hub organisation name" in proc.stderr


def test_lm_eval_on_the_official_export_reads_the_same_splits_as_run(sample_build: Path, hub, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    """`export-lm-eval --official --org evalitahf`: lm-eval reads test_1 / reduced_test / test_all / test_100
    from the stub and builds the same 1-shot contexts as `run --data hf:evalitahf`."""
    pytest.importorskip("lm_eval")
    serve_official(hub, sample_build)
    env = hub_env(hub, tmp_path / "hf")
    tasks = tmp_path / "tasks"
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "export-lm-eval", str(tasks), "--org", "evalitahf", "--official"],
                          env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    entries = ["faq", "hs", "ner_wn", "sum"]
    proc = subprocess.run([sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={tiny_model},dtype=float32",
                           "--device", "cpu", "--include_path", str(tasks), "--tasks", ",".join(f"evalita-llm_{e}_p1" for e in entries),
                           "--limit", "2", "--num_fewshot", "1", "--gen_kwargs", "max_gen_toks=3", "--log_samples",
                           "--output_path", str(tmp_path / "lm")], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = tmp_path / "run"
    proc = run_eval(["--model", str(tiny_model), "--dtype", "float32", "--data", "hf:evalitahf", "--tasks", ",".join(entries),
                     "--prompts", "p1", "--limit", "2", "--num-fewshot", "1", "--max-new-tokens", "3", "--output-dir", str(out)], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for e in entries:
        [path] = list((tmp_path / "lm").glob(f"*/samples_evalita-llm_{e}_p1_*.jsonl"))
        theirs = sorted((json.loads(line) for line in path.read_text("utf-8").splitlines()), key=lambda r: r["doc_id"])
        mine = [json.loads(line) for line in (out / "samples" / f"{e}_p1.jsonl").read_text("utf-8").splitlines()]
        assert [r["arguments"]["gen_args_0"]["arg_0"] for r in theirs] == [m["prompt"] for m in mine], e

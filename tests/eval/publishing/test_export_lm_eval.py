"""`evalita-eval export-lm-eval`: lm-eval 0.4.13 runs the exported tasks on a `push --to-dir`
folder and predicts exactly what `evalita-eval run` predicts, for every built task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evalita_eval.publishing.export_lm_eval import task_name
from evalita_eval.sources.entries import all_entries
from publish_fixtures import sample_build  # noqa: F401 - fixture

MAX_NEW = 3
LIMIT = 2
SHOTS = 1  # exercises the few-shot split and the answers (doc_to_target) of the examples


def offline_env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1",
               TOKENIZERS_PARALLELISM="false")
    return env


def cli(module: str, args: list[str], env: dict, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], env=env, capture_output=True, text=True, cwd=cwd)


def evaluable(build: Path) -> list:
    """Entries whose evaluation split the build has (HS and REL gold tests are not public)."""
    return [e for e in all_entries()
            if (build / e.task_id / (e.config or "") / f"{e.spec.eval_split}.jsonl").is_file()]


def test_exported_yaml_declares_our_prompts_splits_and_metrics(tmp_path: Path) -> None:
    out = tmp_path / "tasks"
    proc = cli("evalita_eval.cli", ["export-lm-eval", str(out), "--org", "my-org"], offline_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    # one YAML per registered entry x prompt, one group per entry and the top group (plus utils.py)
    entries = all_entries()
    assert len(list(out.glob("*.yaml"))) == sum(len(e.spec.prompts) for e in entries) + len(entries) + 1
    assert sum(len(e.spec.prompts) for e in entries if e.spec.output_type == "multiple_choice") >= 36  # the ten tasks' 6 MC x 6
    loader = yaml.SafeLoader
    loader.add_constructor("!function", lambda ld, node: ("function", ld.construct_scalar(node)))
    faq = yaml.load((out / "evalita-llm_faq_p3.yaml").read_text("utf-8"), Loader=loader)  # noqa: S506 - SafeLoader
    assert (faq["dataset_path"], faq["dataset_name"], faq["test_split"], faq["fewshot_split"]) == ("my-org/faq", "default", "test", "dev")
    assert faq["doc_to_text"] == "Rispondi alla seguente domanda: '{{question}}'\nA: {{A}}\nB: {{B}}\nC: {{C}}\nD: {{D}}\nRisposta:"
    assert faq["doc_to_choice"] == ["A", "B", "C", "D"]
    assert faq["process_results"] == ("function", "utils.process_faq_p3")
    assert [m["metric"] for m in faq["metric_list"]] == ["acc", "acc_norm", "acc_bytes"]
    ner = yaml.load((out / "evalita-llm_ner_wn_p2.yaml").read_text("utf-8"), Loader=loader)  # noqa: S506
    assert (ner["dataset_path"], ner["dataset_name"], ner["fewshot_split"]) == ("my-org/ner", "wn", "trial")
    assert ner["generation_kwargs"] == {"until": ["</s>", "\n"], "max_gen_toks": 256, "do_sample": False}
    wic = yaml.load((out / "evalita-llm_wic_p1.yaml").read_text("utf-8"), Loader=loader)  # noqa: S506
    assert wic["doc_to_text"].startswith("{% set w1 = sentence1[start1:end1] %}{% set w2 = sentence2[start2:end2] %}")
    group = yaml.safe_load((out / "evalita-llm_ner_fic.yaml").read_text("utf-8"))
    assert group["task"] == ["evalita-llm_ner_fic_p1", "evalita-llm_ner_fic_p2"]
    official = tmp_path / "official"
    assert cli("evalita_eval.cli", ["export-lm-eval", str(official), "--org", "evalitahf", "--official"], offline_env(tmp_path)).returncode == 0
    faq = yaml.load((official / "evalita-llm_faq_p3.yaml").read_text("utf-8"), Loader=loader)  # noqa: S506
    assert (faq["dataset_path"], faq["test_split"], faq["fewshot_split"]) == ("evalitahf/faq", "test_1", "dev_1")
    assert "dataset_name" not in faq  # the repository's default config, as lm-eval's own YAML
    ner = yaml.load((official / "evalita-llm_ner_wn_p2.yaml").read_text("utf-8"), Loader=loader)  # noqa: S506
    assert (ner["dataset_path"], ner["dataset_name"], ner["test_split"]) == ("evalitahf/entity_recognition", "wn", "reduced_test")
    bad = cli("evalita_eval.cli", ["export-lm-eval", str(tmp_path / "bad"), "--org", "../x"], offline_env(tmp_path))
    assert bad.returncode == 2 and "--org '../x': expected a Hub name" in bad.stderr


def _lm_eval_predictions(samples_dir: Path, name: str, mc: bool) -> list[tuple[str, object]]:
    """(context, prediction) per document: the log-likelihoods of the choices, or the generation."""
    [path] = list(samples_dir.glob(f"*/samples_{name}_*.jsonl"))
    rows = sorted((json.loads(line) for line in path.read_text("utf-8").splitlines()), key=lambda r: r["doc_id"])
    if mc:
        return [(r["arguments"]["gen_args_0"]["arg_0"], [float(ll) for ll, _ in r["filtered_resps"]]) for r in rows]
    return [(r["arguments"]["gen_args_0"]["arg_0"], r["filtered_resps"][0]) for r in rows]


def test_lm_eval_on_the_exported_tasks_predicts_what_run_predicts(sample_build: Path, tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    pytest.importorskip("lm_eval")
    env = offline_env(tmp_path)
    pushed = tmp_path / "pushed"
    proc = cli("evalita_data.cli", ["push", "--build", str(sample_build), "--to-dir", str(pushed)], env)
    assert proc.returncode == 0, proc.stderr
    tasks = tmp_path / "tasks"
    assert cli("evalita_eval.cli", ["export-lm-eval", str(tasks), "--data-dir", str(pushed)], env).returncode == 0
    entries = evaluable(sample_build)
    assert {e.task_id for e in entries} == {"wic", "te", "sa", "faq", "at", "ls", "ner", "sum"}
    names = [task_name(e, p.name) for e in entries for p in e.spec.prompts]
    # one lm-eval invocation for every built task and prompt
    proc = cli("lm_eval", ["--model", "hf", "--model_args", f"pretrained={tiny_model},dtype=float32", "--device", "cpu",
                           "--include_path", str(tasks), "--tasks", ",".join(names), "--limit", str(LIMIT),
                           "--num_fewshot", str(SHOTS), "--gen_kwargs", f"max_gen_toks={MAX_NEW}", "--log_samples", "--output_path", str(tmp_path / "lm")],
               env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ours = tmp_path / "ours"
    proc = cli("evalita_eval.cli", ["run", "--model", str(tiny_model), "--data", str(pushed), "--dtype", "float32",
                                    "--tasks", ",".join(e.name for e in entries), "--limit", str(LIMIT),
                                    "--num-fewshot", str(SHOTS), "--max-new-tokens", str(MAX_NEW), "--output-dir", str(ours)], env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    compared = 0
    for e in entries:
        mc = e.spec.output_type == "multiple_choice"
        for p in e.spec.prompts:
            theirs = _lm_eval_predictions(tmp_path / "lm", task_name(e, p.name), mc)
            mine = [json.loads(line) for line in (ours / "samples" / f"{e.name}_{p.name}.jsonl").read_text("utf-8").splitlines()]
            assert len(theirs) == len(mine) == LIMIT, (e.name, p.name)
            for (context, t), m in zip(theirs, mine):
                assert context == m["prompt"], (e.name, p.name)  # the same few-shot example and prompt
                if mc:
                    assert t == pytest.approx(m["loglikelihoods"], rel=1e-5, abs=1e-4), (e.name, p.name)
                    assert max(range(len(t)), key=t.__getitem__) == max(range(len(t)), key=m["loglikelihoods"].__getitem__)
                else:
                    assert t == m["generation"], (e.name, p.name)
                compared += 1
    assert compared == LIMIT * len(names)


def test_eees_lm_eval_converter_reads_our_exported_tasks_as_our_export(sample_build: Path, tiny_model: Path,  # noqa: F811
                                                                      tmp_path: Path) -> None:
    """EEE's own converter of an lm-eval run of our exported tasks and our export-eee of the same run: the same
    metric ids, and per instance the same sample_hash and is_correct (every sample slot a number)."""
    pytest.importorskip("lm_eval")
    from eee_python import NEEDED, eee_python

    python = eee_python()
    if python is None:
        pytest.skip(f"EEE's lm-eval converter needs {NEEDED}: none found (set EEE_PYTHON to such a Python)")
    env = offline_env(tmp_path)
    pushed, tasks = tmp_path / "pushed", tmp_path / "tasks"
    assert cli("evalita_data.cli", ["push", "--build", str(sample_build), "--to-dir", str(pushed)], env).returncode == 0
    assert cli("evalita_eval.cli", ["export-lm-eval", str(tasks), "--data-dir", str(pushed)], env).returncode == 0
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "tiny").symlink_to(tiny_model)  # EEE's converter wants a model id (org/name), not a path
    names = ["evalita-llm_wic_p1", "evalita-llm_ls_p1"]
    proc = cli("lm_eval", ["--model", "hf", "--model_args", "pretrained=local/tiny,dtype=float32", "--device", "cpu",
                           "--include_path", str(tasks), "--tasks", ",".join(names), "--limit", "3", "--gen_kwargs", "max_gen_toks=3",
                           "--log_samples", "--output_path", str(tmp_path / "lm")], env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    [lm_folder] = list((tmp_path / "lm").iterdir())
    converted = subprocess.run([python, "-m", "every_eval_ever", "convert", "lm_eval", "--log_path", str(lm_folder), "--output_dir",
                                str(tmp_path / "theirs"), "--include_samples"], capture_output=True, text=True)
    assert converted.returncode == 0, converted.stderr[-3000:]
    ours = tmp_path / "ours"
    assert cli("evalita_eval.cli", ["run", "--model", str(tiny_model), "--data", str(pushed), "--dtype", "float32", "--tasks", "wic,ls",
                                    "--prompts", "p1", "--limit", "3", "--max-new-tokens", "3", "--output-dir", str(ours)], env).returncode == 0
    assert cli("evalita_eval.cli", ["export-eee", str(ours), str(tmp_path / "eee")], env).returncode == 0

    def rows(folder: Path, suffix: str) -> list[dict]:
        """The aggregates (one JSON document a file) or the instance lines (JSONL) under ``folder``."""
        texts = [p.read_text("utf-8") for p in sorted(folder.rglob(f"*{suffix}"))]
        if suffix == ".json":
            return [json.loads(t) for t in texts]
        return [json.loads(line) for t in texts for line in t.splitlines() if line]

    their_ids = {r["metric_config"]["metric_id"] for a in rows(tmp_path / "theirs", ".json") for r in a["evaluation_results"]}
    our_ids = {r["metric_config"]["metric_id"] for a in rows(tmp_path / "eee", ".json") for r in a["evaluation_results"]}
    assert their_ids == {"accuracy", "lm-evaluation-harness.acc_norm", "lm-evaluation-harness.acc_bytes",
                         "lm-evaluation-harness.f1_macro", "lm-evaluation-harness.f1_binary", "lm-evaluation-harness.ls_f1"}
    assert their_ids <= our_ids
    counts = [{a["model_info"]["additional_details"].get("num_parameters") for a in rows(tmp_path / side, ".json")}
              for side in ("theirs", "eee")]
    assert counts[0] == counts[1] and None not in counts[0]  # lm-eval's model_num_parameters, as EEE copies it
    theirs = {(r["evaluation_name"], r["evaluation_result_id"], r["sample_id"]): r for r in rows(tmp_path / "theirs", "_samples.jsonl")}
    mine = rows(tmp_path / "eee", "_samples.jsonl")
    assert len(mine) == 6  # wic p1 (f1_macro) and ls p1 (ls_f1), 3 items each
    for r in mine:
        task, prompt, metric = r["evaluation_result_id"].split("/")
        other = theirs[(f"evalita-llm_{task}_{prompt}", metric, r["sample_id"].split("/")[1])]
        assert (other["sample_hash"], other["evaluation"]["is_correct"]) == (r["sample_hash"], r["evaluation"]["is_correct"]), r["sample_id"]

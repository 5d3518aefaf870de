"""`evalita-data push --layout official --to-dir`: lm-eval 0.4.13's own installed evalita_llm task
files, with only `dataset_path` changed, run on the folder, and their per-prompt scores equal ours.

Slow (two model runs over every entry our raw samples build): lm-eval runs in a subprocess
(offline) through tests/lm_eval_official.py, on the tiny model, with a small --limit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from paths import TESTS

lm_eval = pytest.importorskip("lm_eval", reason="lm-evaluation-harness (lm-eval==0.4.13, extra 'all') is not installed")
pytest.importorskip("accelerate", reason="lm-eval's hf model needs accelerate (extra 'all')")

from evalita_data.hub.benchmark import benchmark_task_ids, entry_task_ids, read_benchmark  # noqa: E402
from evalita_data.registry import get_task  # noqa: E402
from lm_eval_official import task_copy  # noqa: E402
from lm_eval_reference import YAMLS  # noqa: E402
from publish_fixtures import sample_build  # noqa: E402,F401 - fixture

LIMIT = 2
MAX_NEW_TOKENS = 8
# Every entry whose official splits the sample build has (HS: no test_all gold; REL: no test nor
# dev; SUM: no dev), and the prompts run of each.
RUNNABLE = ["wic", "te", "sa", "faq", "at", "ls", "ner_adg", "ner_fic", "ner_wn"]
PROMPTS = ["p1", "p2"]
# lm-eval's metric -> ours, per task where they differ (lm-eval's "f1" aggregation is each task's own).
F1 = {"wic": "f1_binary", "sa": "sentipolc_f1", "ls": "ls_f1", "ner": "ner_f1"}
EXPECTED_MISSING = {
    ("hatespeech_detection", "default", "test_all"),
    ("relation_extraction", "default", "test"),
    ("relation_extraction", "default", "dev"),
    ("summarization-fp", "default", "dev"),
}


def _env(tmp: Path) -> dict:
    return dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                HF_DATASETS_CACHE=str(tmp / "hf-datasets"), TOKENIZERS_PARALLELISM="false")


@pytest.fixture(scope="module")
def official(sample_build: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:  # noqa: F811
    out = tmp_path_factory.mktemp("official") / "hub"
    proc = subprocess.run([sys.executable, "-m", "evalita_data.cli", "push", "--build", str(sample_build),
                           "--to-dir", str(out), "--layout", "official"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stdout


def needed_splits(folder: Path) -> set[tuple[str, str, str]]:
    """(repository, config, split) that lm-eval's files of the evaluated prompts read from DATA."""
    needed = set()
    for pattern in YAMLS.values():
        for n in PROMPTS:
            merged: dict = {}
            path = folder / pattern.format(n=n.removeprefix("p"))
            for file in (folder / _include(path), path):
                merged.update({k: v for k, v in _plain_yaml(file).items() if k in
                               ("dataset_path", "dataset_name", "test_split", "fewshot_split", "validation_split")})
            repo = Path(str(merged["dataset_path"])).name
            for key in ("test_split", "fewshot_split", "validation_split"):
                if merged.get(key):
                    needed.add((repo, merged.get("dataset_name") or "default", merged[key]))
    return needed


def test_lm_evals_sum_tasks_read_what_the_docs_say() -> None:
    """lm-eval's own sum files: `evalita-mp` (through evalita-mp_sum_fp) reads all of ARTeLab/fanpage's test split, which
    no layout of ours publishes; only evalita-mp_sum_fp_small reads our official sum (summarization-fp test_100, few-shot
    dev). docs/publishing.md and docs/official-splits.md say so."""
    folder = Path(lm_eval.__file__).parent / "tasks" / "evalita_llm"
    read = {}
    for name in ("_evalita-mp_sum_fp_p1.yaml", "_evalita-mp_sum_fp-small_p1.yaml"):
        merged = {**_plain_yaml(folder / _include(folder / name)), **_plain_yaml(folder / name)}
        read[merged["task"]] = (merged["dataset_path"], merged["test_split"], merged.get("fewshot_split"))
    assert read == {"evalita-sp_sum_task_fp_p1": ("ARTeLab/fanpage", "test", None),
                    "evalita-sp_sum_task_fp-small_p1": ("evalitahf/summarization-fp", "test_100", "dev")}
    assert "evalita-mp_sum_fp" in _plain_yaml(folder / "_evalita-mp.yaml")["task"]
    spec = get_task("sum")
    assert (spec.hub_splits.dataset, spec.hub_splits.test, spec.paper_splits["test"]) == ("summarization-fp", "test_100", 100)
    for doc in ("publishing.md", "official-splits.md"):
        text = " ".join((TESTS.parent / "docs" / doc).read_text("utf-8").split())
        assert "lm-eval's `evalita-mp` group reads `ARTeLab/fanpage` `test`" in text, doc


def _include(path: Path) -> str:
    return next(line.split(":", 1)[1].strip() for line in path.read_text("utf-8").splitlines() if line.startswith("include:"))


def _plain_yaml(path: Path) -> dict:
    """A task file's keys, its `!function` tags read as plain strings (only the dataset keys are used)."""
    text = re.sub(r"!function ", "", path.read_text("utf-8"))
    return yaml.safe_load(text) or {}


def published_splits(out: Path) -> set[tuple[str, str, str]]:
    have = set()
    for card in out.glob("*/README.md"):
        meta = yaml.safe_load(card.read_text("utf-8").split("---\n")[1])
        have |= {(card.parent.name, c["config_name"], f["split"]) for c in meta["configs"] for f in c["data_files"]}
    return have


def test_what_lm_eval_reads_is_published_or_listed_as_missing(official: tuple[Path, str], tmp_path: Path) -> None:
    out, stdout = official
    folder = task_copy(tmp_path / "tasks", out)
    lacking = needed_splits(folder) - published_splits(out)
    assert lacking == EXPECTED_MISSING
    listed = {tuple(re.match(r"missing: evalita-llm/(\S+) \[(\S+)\]: no split (\S+):", line).groups())
              for line in stdout.splitlines() if line.startswith("missing: ")}
    assert listed == EXPECTED_MISSING
    # Every repository's eval.yaml names each entry and prompt on the official evaluation split.
    assert benchmark_task_ids(out / "faq") == entry_task_ids("faq")["faq"] == ["faq"] + [f"faq_p{n}" for n in range(1, 7)]
    assert benchmark_task_ids(out / "entity_recognition") == sum(entry_task_ids("ner").values(), [])
    splits = {t["split"] for t in yaml.safe_load((out / "entity_recognition" / "eval.yaml").read_text("utf-8"))["tasks"]}
    assert splits == {"reduced_test"}
    # Every repository has one, the official benchmark, also where the build lacks its split (said in the missing line).
    assert sorted(p.parent.name for p in out.glob("*/eval.yaml")) == sorted(p.parent.name for p in out.glob("*/README.md"))
    for repo, split in (("relation_extraction", "test"), ("hatespeech_detection", "test_all")):
        assert {(t["config"], t["split"]) for t in read_benchmark(out / repo / "eval.yaml")} == {("default", split)}
        assert re.search(rf"^missing: evalita-llm/{repo} \[default\]: no split {split}: .*; eval.yaml names it, as the official "
                         "benchmark$", stdout, re.M), stdout


@pytest.mark.parametrize("shots, prompts", [(0, PROMPTS), (1, ["p1"])])
def test_lm_eval_task_files_score_the_official_push_as_we_do(official: tuple[Path, str], tiny_model: Path, tmp_path: Path,
                                                             shots: int, prompts: list[str]) -> None:
    """0-shot: every runnable entry, two prompts; 1-shot: the examples come from the renamed few-shot
    splits (faq dev_1, ner trial...), so the contexts and scores agree only if they hold our records."""
    out, _ = official
    folder = task_copy(tmp_path / "tasks", out)
    pairs = [f"{e}:{p}" for e in RUNNABLE for p in prompts]
    ref = tmp_path / "lm-eval.json"
    proc = subprocess.run([sys.executable, str(TESTS / "lm_eval_official.py"), str(ref), str(tiny_model), str(folder),
                           str(LIMIT), str(MAX_NEW_TOKENS), str(shots), *pairs], env=_env(tmp_path), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    theirs = json.loads(ref.read_text("utf-8"))
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(tiny_model), "--data", f"hf:{out}",
                           "--tasks", ",".join(RUNNABLE), "--prompts", ",".join(prompts), "--limit", str(LIMIT), "--num-fewshot", str(shots),
                           "--max-new-tokens", str(MAX_NEW_TOKENS), "--output-dir", str(run)],
                          env=_env(tmp_path / "ours"), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ours = json.loads((run / "results.json").read_text("utf-8"))["results"]
    compared = 0
    for pair in pairs:
        entry, prompt = pair.split(":")
        task = entry.split("_")[0]
        assert len(theirs[pair]["samples"]) == LIMIT, pair
        mine = ours[entry][prompt]
        assert mine["n"] == LIMIT, pair
        _same_answers(theirs[pair]["samples"], run / "samples" / f"{entry}_{prompt}.jsonl", pair)
        for metric, value in theirs[pair]["metrics"].items():
            name = metric.split(",")[0]
            name = F1.get(task, "f1_binary") if name == "f1" else name
            if name in get_task(task).metric_names():
                assert mine[name] == pytest.approx(value, abs=1e-9), (pair, metric, mine[name], value)
                compared += 1
    assert compared >= len(pairs)  # at least the task's own metric of every prompt


def _same_answers(theirs: list[dict], samples: Path, pair: str) -> None:
    """Per document: the same context, and the same choice log-likelihoods (1e-6 relative) or generation."""
    mine = [json.loads(line) for line in samples.read_text("utf-8").splitlines()]
    assert len(mine) == len(theirs) == LIMIT, pair
    for s_mine, s_ref in zip(mine, theirs):
        assert {a[0] for a in s_ref["arguments"]} == {s_mine["prompt"]}, (pair, s_ref["doc_id"])
        if "loglikelihoods" in s_mine:
            lls = [r[0][0] for r in s_ref["resps"]]
            for a, b in zip(s_mine["loglikelihoods"], lls, strict=True):
                assert abs(a - b) <= 1e-6 * abs(b) + 1e-5, (pair, s_ref["doc_id"], a, b)
        else:
            assert s_mine["generation"] == s_ref["resps"][0][0], (pair, s_ref["doc_id"])


# Every entry and prompt whose lm-eval's own metric the EEE ids must join: each MC family, ls, ner (their "f1").
EEE_PAIRS = ["wic:p1", "te:p1", "sa:p1", "faq:p1", "at:p1", "ls:p1", "ner_adg:p1"]


def test_our_eee_export_joins_eees_conversion_of_lm_evals_own_tasks(official: tuple[Path, str], tiny_model: Path,
                                                                     tmp_path: Path) -> None:
    """EEE's own lm-eval converter, on an lm-eval run of lm-eval's own evalita_llm files, and our export-eee of our run
    of the same items: every (task, prompt, metric id) of theirs is one of ours, with the same score."""
    from eee_python import NEEDED, eee_python
    from evalita_eval.reporting.lm_eval_tasks import entry_and_prompt

    python = eee_python()
    if python is None:
        pytest.skip(f"EEE's lm-eval converter needs {NEEDED}: none found (set EEE_PYTHON to such a Python)")
    out, _ = official
    folder = task_copy(tmp_path / "tasks", out)
    lm_out = tmp_path / "lm"
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "tiny").symlink_to(tiny_model)  # EEE's converter wants a model id (org/name), not a path
    proc = subprocess.run([sys.executable, str(TESTS / "lm_eval_official.py"), str(tmp_path / "lm.json"), "local/tiny",
                           str(folder), str(LIMIT), str(MAX_NEW_TOKENS), "0", *EEE_PAIRS, "--output-path", str(lm_out)],
                          env=_env(tmp_path), capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    [lm_folder] = [p.parent for p in lm_out.rglob("results_*.json")]
    converted = subprocess.run([python, "-m", "every_eval_ever", "convert", "lm_eval", "--log_path", str(lm_folder),
                                "--output_dir", str(tmp_path / "theirs")], capture_output=True, text=True)
    assert converted.returncode == 0, converted.stderr[-3000:]
    run = tmp_path / "run"
    entries = sorted({p.split(":")[0] for p in EEE_PAIRS})
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "run", "--model", str(tiny_model), "--data", f"hf:{out}",
                           "--tasks", ",".join(entries), "--prompts", "p1", "--limit", str(LIMIT),
                           "--max-new-tokens", str(MAX_NEW_TOKENS), "--output-dir", str(run)],
                          env=_env(tmp_path / "ours"), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    exported = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "export-eee", str(run), str(tmp_path / "eee")],
                              env=_env(tmp_path / "ours"), capture_output=True, text=True)
    assert exported.returncode == 0, exported.stderr[-3000:]

    def scores(root: Path, name_of) -> dict[tuple[str, str, str], float]:
        found = {}
        for path in root.rglob("*.json"):
            for row in json.loads(path.read_text("utf-8"))["evaluation_results"]:
                key = name_of(row["evaluation_name"])
                if key is not None:
                    found[(*key, row["metric_config"]["metric_id"])] = row["score_details"]["score"]
        return found

    theirs = scores(tmp_path / "theirs", entry_and_prompt)
    ours = scores(tmp_path / "eee", lambda name: tuple(name.split(" ")) if name.split(" ")[1] != "CPS" else None)
    assert {(e, p) for e, p, _ in theirs} == {tuple(p.split(":")) for p in EEE_PAIRS}
    missing = sorted(set(theirs) - set(ours))
    assert not missing, f"{len(missing)} of {len(theirs)} of EEE's ids not in our export: {missing}"
    for key, value in theirs.items():
        assert ours[key] == pytest.approx(value, abs=1e-9), key

"""What results.json, the report and the console say about a run (issue 23): setting, unparsed k / n,
baselines, timing over resumes, progress totals, partial runs, non-official splits, default output folders."""

from __future__ import annotations

import json
import shutil

from markupsafe import escape
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_eval.running import stream as stream_mod
from evalita_eval.cli import main
from evalita_eval.reporting.report import write_report

from browser_layout import require_chromium
from paths import TESTS

HERE = TESTS
DATA = HERE / "data" / "build"
RESULTS = HERE / "data" / "results"


def _run(args: list[str]) -> str:
    result = CliRunner().invoke(main, ["run", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def _samples(out: Path, name: str) -> list[dict]:
    return [json.loads(x) for x in (out / "samples" / f"{name}.jsonl").read_text("utf-8").splitlines()]


@pytest.fixture(scope="module")
def ce_run(tiny_model: Path, tmp_path_factory) -> tuple[Path, dict, dict]:
    """A CE run of the tiny model on WiC and TE, then the same command again (a resume: every request cached)."""
    out = tmp_path_factory.mktemp("ce") / "run"
    args = ["--model", str(tiny_model), "--data", str(DATA), "--tasks", "wic,te", "--setting", "ce", "--max-new-tokens", "4",
            "--apply-chat-template", "--system-instruction", "Rispondi con una lettera.", "--output-dir", str(out)]
    _run(args)
    first = json.loads((out / "results.json").read_text("utf-8"))
    _run(args)
    return out, first, json.loads((out / "results.json").read_text("utf-8"))


def test_results_json_states_rules_baselines_and_template(ce_run) -> None:
    out, _first, doc = ce_run
    assert doc["config"]["setting"] == "ce" and doc["config"]["split"] is None and doc["comparable_with_paper"] is False
    assert doc["not_comparable_with_paper"] == ["--max-new-tokens 4: the paper's budget is te 16, wic 16"]
    template = json.loads((Path(doc["model"]["name_or_path"]) / "tokenizer_config.json").read_text("utf-8")).get("chat_template")
    if isinstance(template, str):
        import hashlib

        assert doc["config"]["chat_template"] == {"source": "tokenizer", "sha256": hashlib.sha256(template.encode()).hexdigest()}
    assert doc["tasks"] == {"planned": ["wic", "te"], "skipped": []}
    for task in ("wic", "te"):
        for prompt in ("p1", "p2"):
            samples = _samples(out, f"{task}_{prompt}")
            # issue 28: an unparsed answer is counted under its reason ("unparsed: echo"), recorded in its sample
            counts = Counter(s["parsed_by"] or f"unparsed: {s['unparsed_reason']}" for s in samples)
            assert doc["parsed_by"][task][prompt] == dict(sorted(counts.items()))
            unparsed = sum(v for k, v in counts.items() if k.startswith("unparsed: "))
            assert unparsed == doc["results"][task][prompt]["unparsed"]
            assert sum(counts.values()) == doc["results"][task][prompt]["n"] == 3
            assert all((s["parsed_by"] is None) == (s["unparsed_reason"] is not None) for s in samples)
            # flagged at 10 % or more unparsed: here any unparsed answer of 3
            flag = doc["unparsed_flags"].get(task, {}).get(prompt)
            assert flag == ({"unparsed": unparsed, "n": 3, "share": round(unparsed / 3, 4)} if unparsed else None)
        golds = [s["gold"] for s in _samples(out, f"{task}_p1")]
        top = Counter(golds).most_common()
        majority = min(c for c, k in top if k == top[0][1])
        base = doc["baselines"][task]
        assert base["n"] == 3 and base["majority_class"] == majority
        assert base["chance"]["acc"] == 0.5  # two options: 1/2 on every item
        assert base["majority"]["acc"] == golds.count(majority) / 3
    # f1_binary of always answering the majority class (WiC): 2*TP / (2*TP + FP + FN) of class 1
    wic_golds = [s["gold"] for s in _samples(out, "wic_p1")]
    pos = wic_golds.count(1)
    expected = 0.0 if doc["baselines"]["wic"]["majority_class"] == 0 else 2 * pos / (2 * pos + (3 - pos))
    assert doc["baselines"]["wic"]["majority"]["f1_binary"] == pytest.approx(expected)
    assert doc["unparsed_flags"], "the tiny model's 4-token answers leave some prompt flagged: the checks above saw one"


def test_timing_accumulates_over_resumes(ce_run) -> None:
    _out, first, second = ce_run
    for task in ("wic", "te"):
        a, b = first["timing"][task], second["timing"][task]
        assert a["requests"] == 6 and a["computed"] == 6 and a["cached"] == 0 and a["compute_s"] > 0
        # the resume computed nothing: its compute time adds zero; each request counts once, computed by the run
        assert b["requests"] == 6 and b["computed"] == 6 and b["cached"] == 0
        assert b["compute_s"] == a["compute_s"] and b["wall_s"] >= a["wall_s"]


def test_single_ce_run_report_markdown_and_html(ce_run, tmp_path: Path) -> None:
    out, _first, doc = ce_run
    write_report([out / "results.json"], tmp_path, k=5)
    md = (tmp_path / "report.md").read_text("utf-8")
    html = (tmp_path / "report.html").read_text("utf-8")
    # The run details, transposed (issue 40): one row per detail, one column per model.
    for row in ("| setting | ce |", "| constrained | no |", "| system instruction | Rispondi con una lettera. |", "| few-shot | 0 |",
                "| split | official |", "| comparable with the paper | no: --max-new-tokens 4: the paper's budget is te 16, wic 16 |",
                "| n per prompt | 3 |", "| limit | all |", "| revision | – (local folder) |", "| status | complete |"):
        assert f"\n{row}\n" in md, row
    assert "\n| chat template | yes, sha256 " in md
    minutes = sum(t["compute_s"] for t in doc["timing"].values()) / 60
    time_cell = f"min wall, {minutes:.1f} min compute, 0 of 12 requests from the cache |"  # each request once
    assert time_cell in md
    for task in ("wic", "te"):
        r = doc["results"][task]
        # issue 28: a prompt with >= 10 % unparsed answers (here: any of 3) is marked, and a note under its table says so
        unparsed = ", ".join(f"{p} {r[p]['unparsed']} / 3" + (" (!)" if r[p]["unparsed"] else "") for p in ("p1", "p2"))
        for p in ("p1", "p2"):
            note = (f"{task} {p} (!) no answer read (3/3 unparsed): none of its answers could be read" if r[p]["unparsed"] == 3  # issue 40
                    else f"{task} {p} (!) {r[p]['unparsed']}/3 unparsed: 10 % or more of its answers could not be read")
            assert (note in md and note in html) == bool(r[p]["unparsed"]), note
        rules = "; ".join(f"{p}: " + ", ".join(f"{k} {v}" for k, v in doc["parsed_by"][task][p].items()) for p in ("p1", "p2"))
        base = doc["baselines"][task]
        metric = "f1_macro" if task == "wic" else "acc"  # the headline metrics
        chance = f"{100 * base['chance'][metric]:.2f}"
        labels = []  # the majority class as each prompt words it (the same choices for every item of a prompt here)
        for p in ("p1", "p2"):
            first = json.loads((out / "samples" / f"{task}_{p}.jsonl").read_text("utf-8").splitlines()[0])
            labels += [first["choices"][base["majority_class"]]] if first["choices"][base["majority_class"]] not in labels else []
        assert labels and not labels[0].isdigit()
        quoted = " / ".join('"' + x + '"' for x in labels)
        majority = f"{100 * base['majority'][metric]:.2f} ({quoted})"
        row = f"| {doc['model']['name']} | 3 | all | {chance} | {majority} | {unparsed} | {rules} |"  # <folder>-<weights hash>
        assert row in md, row
        cells = f"<td class=\"text\">{chance}</td><td class=\"text\">{escape(majority)}</td><td class=\"text\">{unparsed}</td>"
        assert cells in html
    assert "Rank score basis" not in md + html  # one run: no rank, so no basis of one
    # the run details: one definition list per model (issue 40), not a 17-column table breaking words
    assert '<h2>Models</h2>\n<div class="models"><dl class="facts"><h3>' in html and "<dt>setting</dt><dd>ce</dd>" in html
    assert "ce, sha256" not in html and "Rispondi con una lettera." in html and time_cell.split(" |")[0] in html


def test_single_ce_run_report_renders_in_headless_chromium(ce_run, tmp_path: Path) -> None:
    require_chromium()
    out, _first, _doc = ce_run
    write_report([out / "results.json"], tmp_path, k=5)
    png = tmp_path / "report.png"
    subprocess.run([str(HERE.parent / "scripts" / "render_report.sh"), str(tmp_path / "report.html"), str(png), "1400,2000"],
                   check=True, capture_output=True)
    from PIL import Image

    with Image.open(png) as im:
        assert im.size == (1400, 2000) and len(im.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 100


class _Bar(stream_mod.tqdm):
    """Records each bar's total and where it ended."""

    seen: list = []

    def close(self) -> None:
        if self.desc:
            _Bar.seen.append((self.desc, self.total, self.n))
        super().close()


@pytest.mark.parametrize("setting", ["loglikelihood", "ce-ni"])
def test_progress_totals_are_the_requests_sent(tiny_model: Path, tmp_path: Path, monkeypatch, setting: str) -> None:
    monkeypatch.setattr(stream_mod, "tqdm", _Bar)
    _Bar.seen = []
    _run(["--model", str(tiny_model), "--data", str(DATA), "--tasks", "wic,sa,faq", "--setting", setting, "--max-new-tokens", "2",
          "--progress", "--output-dir", str(tmp_path)])
    doc = json.loads((tmp_path / "results.json").read_text("utf-8"))
    # One bar for the run's stream of its one request kind (running/stream.py), ended at its total.
    total = sum(doc["timing"][task]["requests"] for task in ("wic", "sa", "faq"))
    assert set(_Bar.seen) == {("log-likelihoods" if setting == "loglikelihood" else "generations", total, total)}  # closed on exit and again by tqdm
    if setting == "ce-ni":  # one generation per document and prompt, not one per choice (SA: 4 classes, FAQ: 4 options)
        for task in ("sa", "faq"):
            docs = len((DATA / task / "test.jsonl").read_text("utf-8").splitlines())
            assert doc["timing"][task]["requests"] == 2 * docs


def _partial_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "beta"
    shutil.copytree(RESULTS / "beta", folder)
    doc = json.loads((folder / "results.json").read_text("utf-8"))
    doc["status"] = "partial"
    doc["tasks"] = {"planned": ["te", "hs", "ner", "sa"], "skipped": ["sa"]}
    doc["results"] = {"te": doc["results"]["te"]}
    (folder / "results.json").write_text(json.dumps(doc), "utf-8")
    return folder / "results.json"


def test_report_partial_run(tmp_path: Path) -> None:
    path = _partial_copy(tmp_path)
    refused = CliRunner().invoke(main, ["report", str(path), "--out", str(tmp_path / "r"), "--bootstrap", "0"])
    assert refused.exit_code == 1 and "1 of 3 tasks finished" in refused.output and "--partial" in refused.output
    ok = CliRunner().invoke(main, ["report", str(path), "--out", str(tmp_path / "r"), "--bootstrap", "0", "--partial"])
    assert ok.exit_code == 0, ok.output
    md = (tmp_path / "r" / "report.md").read_text("utf-8")
    assert "> note: beta-8b: partial run: 1 of 3 tasks finished (report --partial): its other tasks are missing" in md
    assert "| partial run: 1 of 3 tasks finished |" in md and "## te (acc)" in md and "## hs" not in md
    assert "partial run: 1 of 3 tasks finished" in (tmp_path / "r" / "report.html").read_text("utf-8")


def test_rank_score_only_over_shared_tasks(tmp_path: Path) -> None:
    paths = []
    for name, keep in (("alpha", "te"), ("beta", "hs")):
        doc = json.loads((RESULTS / name / "results.json").read_text("utf-8"))
        doc["results"] = {keep: doc["results"][keep]}
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(doc), "utf-8")
        paths.append(tmp_path / name / "results.json")
    write_report(paths, tmp_path / "r", k=0)
    payload = json.loads((tmp_path / "r" / "report.json").read_text("utf-8"))
    assert payload["mean_rank_score"] == {}  # no task in common: no rank, not "1.00" for both
    md = (tmp_path / "r" / "report.md").read_text("utf-8")
    summary = md.split("## Summary")[1].split("##")[0]
    assert all(line.rstrip().endswith("| – |") for line in summary.splitlines() if line.startswith("| ") and "model" not in line
               and "---" not in line)


def test_split_is_recorded_and_marked(tiny_model: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    console = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "hs", "--split", "dev"],
                                 catch_exceptions=False)
    assert console.exit_code == 0, console.output
    folder = Path(console.output.split("writing to ", 1)[1].split(" (split dev: not comparable with the paper)", 1)[0])
    doc = json.loads((folder / "results.json").read_text("utf-8"))
    assert folder == Path("results") / tiny_model.name / f"loglikelihood-dev-{doc['run_id']}"
    assert doc["config"]["split"] == "dev" and doc["comparable_with_paper"] is False
    dev = [json.loads(x) for x in (DATA / "hs" / "dev.jsonl").read_text("utf-8").splitlines()]
    assert doc["results"]["hs"]["p1"]["n"] == len(dev) and list(doc["data"]["manifest_sha256"]["hs"]) == ["dev"]
    assert _samples(folder, "hs_p1")[0]["prompt"].count(dev[0]["full_text"]) == 1
    write_report([folder / "results.json"], tmp_path / "r", k=0)
    md = (tmp_path / "r" / "report.md").read_text("utf-8")
    assert ": not comparable with the paper: --split dev: not the tasks' evaluation split" in md
    assert doc["not_comparable_with_paper"] == ["--split dev: not the tasks' evaluation split"]
    assert "> note: evaluated on a non-official split: not comparable with the paper" in md
    assert "| dev (not comparable with the paper) |" in md
    # the run's name carries the split in every table (summary, task tables)
    assert md.count(f"| {doc['model']['name']} [split dev: not comparable with the paper] |") >= 2  # <folder>-<weights hash>


def test_run_folder_names(tmp_path: Path) -> None:
    from evalita_eval.naming import model_slug, run_folder, setting_slug

    assert model_slug("HuggingFaceTB/SmolLM2-135M-Instruct") == "HuggingFaceTB__SmolLM2-135M-Instruct"
    assert model_slug("org/m", "v1.0") == "org__m@v1.0"
    (tmp_path / "my model").mkdir()
    assert model_slug(str(tmp_path / "my model") + "/") == "my_model"  # a local folder: its own name, never the path
    assert model_slug("..") == "model"
    assert setting_slug("ce", True, 5, "dev") == "ce-constrained-5shot-dev" and setting_slug(None) == "loglikelihood"
    assert run_folder({"name_or_path": "org/m", "revision": None}, {"setting": "oe", "num_fewshot": 0}, "0123abcdef") == "org__m/oe-0123abcdef"
    assert run_folder({"name_or_path": "m"}, {"setting": "oe", "thinking": True, "split": "dev"}, "1") == "m/oe-dev-thinking-1"


def test_interrupted_task_keeps_its_time(tiny_model: Path, tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C during a task: the time and requests computed so far are written, and the resume adds to them."""
    from evalita_eval.backends.hf import HFBackend

    real = HFBackend.generate_until
    calls: list[int] = []

    def interrupted_on_second_call(self, requests, **streamed):
        calls.append(len(requests))
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, requests, **streamed)

    args = ["run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "te", "--setting", "ce", "--max-new-tokens", "2",
            "--batch-size", "1", "--output-dir", str(tmp_path)]
    monkeypatch.setattr(HFBackend, "generate_until", interrupted_on_second_call)
    stopped = CliRunner().invoke(main, args)
    assert stopped.exit_code == 130, stopped.output
    doc = json.loads((tmp_path / "results.json").read_text("utf-8"))
    assert doc["status"] == "partial" and doc["results"] == {}
    first = doc["timing"]["te"]
    assert (first["requests"], first["computed"], first["cached"]) == (3, 3, 0) and first["compute_s"] > 0  # p1's 3 answers
    monkeypatch.setattr(HFBackend, "generate_until", real)
    _run(args[1:])
    done = json.loads((tmp_path / "results.json").read_text("utf-8"))["timing"]["te"]
    # each request once (3 docs x 2 prompts): the 3 read back are those the interrupted invocation computed
    assert (done["requests"], done["computed"], done["cached"]) == (6, 6, 0) and done["compute_s"] >= first["compute_s"]


def test_ctrl_c_of_a_loglikelihood_run_with_nothing_saved_speaks_of_log_likelihoods(tiny_model: Path, tmp_path: Path, monkeypatch) -> None:
    """Issue 40: Ctrl-C before the first log-likelihood was saved said "0 generations ... were saved"."""
    from evalita_eval.backends.hf import HFBackend

    def interrupted(self, requests):
        raise KeyboardInterrupt

    monkeypatch.setattr(HFBackend, "loglikelihood", interrupted)
    stopped = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--data", str(DATA), "--tasks", "te", "--output-dir", str(tmp_path)])
    assert stopped.exit_code == 130, stopped.output
    assert (f"0 log-likelihoods of this run were saved in {tmp_path / 'cache.jsonl'} (0 from earlier runs); "
            f"{tmp_path / 'results.json'} is marked partial; rerun the same command to resume") in stopped.output
    assert "generations" not in stopped.output


@pytest.mark.parametrize(("key", "value", "message"), [  # the record's reader (docs/run-record.md): one line, file and key
    ("timing", {"te": {"wall_s": float("nan")}}, ":1: key timing.te.wall_s: not a finite number (NaN or Infinity)"),
    ("parsed_by", {"te": {"p1": {"exact": "7"}}}, ": key parsed_by.te.p1.exact: '7' is not of type 'integer'"),
    ("parsed_by", {"te": ["p1"]}, ": key parsed_by.te: ['p1'] is not of type 'object'"),
    ("tasks", {"planned": "te"}, ": key tasks.planned: 'te' is not of type 'array'"),
    ("baselines", {"te": 0.5}, ": key baselines.te: 0.5 is not of type 'object'"),
])
def test_report_checks_the_run_facts(tmp_path: Path, key: str, value, message: str) -> None:
    doc = json.loads((RESULTS / "beta" / "results.json").read_text("utf-8"))
    doc[key] = value
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc), "utf-8")
    res = CliRunner().invoke(main, ["report", str(path), "--out", str(tmp_path / "r"), "--bootstrap", "0"])
    assert res.exit_code == 1 and res.output == f"error: {path}{message}\n"

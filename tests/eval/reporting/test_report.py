"""evalita-eval report on the fake results.json fixtures of tests/data/results/."""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_eval.reporting import report as report_mod
from evalita_eval.reporting import task_report as task_report_mod
from evalita_eval.cli import main
from evalita_eval.record import read_run
from evalita_eval.record.model import ModelRecord

from browser_layout import require_chromium
from paths import ROOT, TEST_DATA

RESULTS = TEST_DATA / "results"
FILES = [RESULTS / m / "results.json" for m in ("alpha", "beta", "alpha2")]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

_spec = importlib.util.spec_from_file_location("make_fixtures", RESULTS / "make_fixtures.py")
fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixtures)


def score_samples(metric: str, samples: list[dict], task: str | None = None) -> float:
    """Stands in for evalita_eval.metrics.score_samples: the fixtures' acc and f1_macro."""
    return {"acc": fixtures.acc, "f1_macro": fixtures.f1_macro}[metric](samples)


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    report_mod.write_report(FILES, out, k=40, seed=1, score_samples=score_samples)
    return out


def test_fixture_scores_match_their_samples():
    for path in FILES:
        doc = json.loads(path.read_text())
        for task, prompts in doc["results"].items():
            for prompt, metrics in prompts.items():
                samples_file = path.parent / "samples" / f"{task}_{prompt}.jsonl"
                if not samples_file.exists():
                    continue
                samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
                assert len(samples) == metrics["n"]
                for metric in ("acc", "f1_macro"):
                    if metric in metrics:
                        assert score_samples(metric, samples) == metrics[metric]


def test_display_names_are_disambiguated():
    runs = [read_run(p) for p in FILES]
    report_mod.assign_display_names(runs)
    # both org-a and org-c publish alpha-7b
    assert [r.display for r in runs] == ["org-a/alpha-7b", "beta-8b", "org-c/alpha-7b"]
    runs[2].model = replace(runs[0].model, revision="v2")
    report_mod.assign_display_names(runs)
    assert [r.display for r in runs] == ["org-a/alpha-7b@main", "beta-8b", "org-a/alpha-7b@v2"]
    runs[2].model = replace(runs[0].model)
    report_mod.assign_display_names(runs)
    assert [r.display for r in runs] == ["org-a/alpha-7b@main #1", "beta-8b", "org-a/alpha-7b@main #2"]
    # local folders (no revision): named by the folder and the weights' fingerprint, never by their path
    runs[0].model = ModelRecord("/tmp/xyz/run1/model", revision=None, files_sha256="ab12cd34" + "0" * 56)
    runs[2].model = ModelRecord("/tmp/xyz/run2/model", revision=None, files_sha256="ef56" + "0" * 60)
    report_mod.assign_display_names(runs)
    assert [r.display for r in runs] == ["model-ab12cd34", "beta-8b", "model-ef560000"]
    runs[2].model = replace(runs[0].model, name_or_path="/tmp/xyz/run2/model")
    report_mod.assign_display_names(runs)
    assert [r.display for r in runs] == ["model-ab12cd34 #1", "beta-8b", "model-ab12cd34 #2"]
    # a name given with --model-name (results.json's model.name) is the name, whatever the folder
    runs[2].model = replace(runs[0].model, name="SmolLM2 135M")
    report_mod.assign_display_names(runs)
    assert [r.display for r in runs] == ["model-ab12cd34", "beta-8b", "SmolLM2 135M"]


def test_headline_metric_is_the_first_declared():
    assert task_report_mod.headline_metric("hs", ["acc", "f1_macro"]) == ("f1_macro", None)
    assert task_report_mod.headline_metric("ner_adg", ["ner_f1", "ner_f1_strict"]) == ("ner_f1", None)
    metric, note = task_report_mod.headline_metric("mytask", ["bleu"])
    assert metric == "bleu" and "not in the registry" in note


def test_report_tables_hold_the_results_in_percent(report_dir):
    data = json.loads((report_dir / "report.json").read_text())
    assert list(data["tasks"]) == ["te", "hs", "ner"]  # registry order
    hs = data["tasks"]["hs"]
    assert hs["metric"] == "f1_macro"
    assert hs["models"] == ["org-a/alpha-7b", "beta-8b", "org-c/alpha-7b"]
    assert hs["prompts"] == [f"p{i}" for i in range(1, 7)]
    alpha = json.loads(FILES[0].read_text())["results"]["hs"]
    assert hs["scores"][3][0] == pytest.approx(100 * alpha["p4"]["f1_macro"])
    column = [100 * alpha[p]["f1_macro"] for p in hs["prompts"]]
    assert hs["per_model"]["org-a/alpha-7b"]["MaxP"] == pytest.approx(max(column))
    assert hs["per_model"]["org-a/alpha-7b"]["AvgP"] == pytest.approx(sum(column) / 6)
    md = (report_dir / "report.md").read_text()
    assert f"| p4 | {100 * alpha['p4']['f1_macro']:.2f} |" in md


def test_report_bootstrap_and_rank_scores(report_dir):
    data = json.loads((report_dir / "report.json").read_text())
    te = data["tasks"]["te"]
    assert len(te["bootstrap"]) == 18 and te["rank_basis"] == "bootstrap of AvgP (k=40)"
    cell = te["bootstrap"]["beta-8b/p3"]
    assert cell["pct_low"] <= cell["ci_low"] <= cell["mean"] <= cell["ci_high"] <= cell["pct_high"]
    # ner has no samples files: no CIs, ranks from the prompt scores, and the report says so
    assert data["tasks"]["ner"]["bootstrap"] == {}
    assert any("no samples file" in n for n in data["tasks"]["ner"]["notes"])
    ranks = data["mean_rank_score"]
    assert set(ranks) == {"org-a/alpha-7b", "beta-8b", "org-c/alpha-7b"}
    assert min(ranks.values()) >= 1.0
    md = (report_dir / "report.md").read_text()
    assert "bootstrap omitted: no samples file" in md and "Rank score basis: bootstrap of AvgP (k=40)." in md


def test_report_writes_self_contained_html_and_pngs(report_dir):
    html = (report_dir / "report.html").read_text()
    sources = re.findall(r'src="([^"]+)"', html)
    assert len(sources) == 4  # rank vs alpha + three heatmaps
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG_MAGIC)
    assert "<link" not in html and "http" not in html
    plots = sorted(p.name for p in (report_dir / "plots").iterdir())
    assert plots == ["heatmap_hs.png", "heatmap_ner.png", "heatmap_te.png", "rank_vs_alpha.png"]
    assert all((report_dir / "plots" / p).read_bytes().startswith(PNG_MAGIC) for p in plots)
    md = (report_dir / "report.md").read_text()
    assert all(f"(plots/{p})" in md for p in plots)


def test_report_is_deterministic(report_dir, tmp_path):
    report_mod.write_report(FILES, tmp_path, k=40, seed=1, score_samples=score_samples)
    for name in ("report.md", "report.html", "report.json", "plots/heatmap_te.png"):
        assert (tmp_path / name).read_bytes() == (report_dir / name).read_bytes(), name


@pytest.mark.smoke
def test_report_cli_bootstraps_with_the_declared_metrics(tmp_path):
    res = CliRunner().invoke(main, ["report", *map(str, FILES[:2]), "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "report.md").read_text()
    assert md.count("Score and 95% percentile interval (bootstrap, k=100, seed 0)") == 2  # te and hs, not ner
    assert "| beta-8b |" in md and "alpha2" not in md


def test_report_flags_incomparable_runs(tmp_path):
    doc = json.loads(FILES[1].read_text())
    doc["data"]["manifest_sha256"]["te"] = {"test": "other"}
    doc["config"]["num_fewshot"] = 5
    other = tmp_path / "other" / "results.json"
    other.parent.mkdir()
    other.write_text(json.dumps(doc))
    report_mod.write_report([FILES[0], other], tmp_path / "out", k=0)
    notes = json.loads((tmp_path / "out" / "report.json").read_text())["tasks"]["te"]["notes"]
    assert any("manifest_sha256 differs" in n for n in notes)
    assert any("config.num_fewshot differs" in n and "beta-8b=5" in n for n in notes)


def test_report_rejects_a_bad_results_file(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps({"model": {"name_or_path": "m"}, "results": {"te": {"p1": {"acc": 1.5, "n": 3}}}}))
    res = CliRunner().invoke(main, ["report", str(bad), "--out", str(tmp_path / "o"), "--bootstrap", "0"])
    assert res.exit_code == 1
    assert "results.te.p1.acc: score 1.5 is outside [0, 1]" in res.output
    bad.write_text(json.dumps({"results": {}}))
    res = CliRunner().invoke(main, ["report", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code == 1 and "results.json: key model: missing, a required key of format_version 2" in res.output




def test_report_renders_in_headless_chromium(report_dir, tmp_path):
    require_chromium()
    script = ROOT / "scripts" / "render_report.sh"
    png = tmp_path / "report.png"
    subprocess.run([str(script), str(report_dir / "report.html"), str(png), "1400,2000"], check=True,
                   capture_output=True)
    from PIL import Image

    with Image.open(png) as im:
        assert im.size == (1400, 2000)
        # A rendered page, not a blank one: many distinct colours (tables, plots).
        assert len(im.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 100


def _runs(tmp_path: Path, count: int) -> list[Path]:
    """``count`` runs: copies of the alpha fixture under model names of a realistic length."""
    paths = []
    for i in range(count):
        run = tmp_path / "runs" / f"m{i}"
        shutil.copytree(RESULTS / "alpha", run)
        doc = json.loads((run / "results.json").read_text("utf-8"))
        doc["model"]["name_or_path"] = f"some-organisation/Llama-3.1-8B-Instruct-variant-{i:02d}"
        (run / "results.json").write_text(json.dumps(doc), "utf-8")
        paths.append(run / "results.json")
    return paths


@pytest.mark.parametrize("models", [1, 12])
def test_run_details_break_no_word_in_headless_chromium(tmp_path, models):
    """Issue 40: the 17-column Models table broke headers and values mid-word (`dt ype`, `flo at3 2`) at 1,400 px;
    the run details are now one definition list per model, and no word of them spans two lines at 1,280 or 1,920 px."""
    require_chromium()
    from browser_layout import broken_words

    report_mod.write_report(_runs(tmp_path, models), tmp_path / "report", k=0)
    facts = 17  # the model's name and its 16 details
    for width in (1280, 1920):
        checked, broken = broken_words(tmp_path / "report" / "report.html", width)
        assert checked == models * (1 + 2 * (facts - 1)) and broken == [], (width, broken)


def test_two_settings_of_twelve_models_fit_1280_px_in_headless_chromium(tmp_path):
    """Issue 47: with two settings the Summary had a column per task and setting (te [loglikelihood] CPS, te [ce] CPS),
    half of them empty, and its AvgP/CPS/Sharpe lay behind a scrollbar at 1,280 px; now one column per task (each
    row, one model in one setting, finds its own), and the row names wrap where needed, no word broken."""
    require_chromium()
    from browser_layout import broken_words, table_widths
    from evalita_data.registry import tasks

    paths = []
    for i in range(12):
        for setting in ("loglikelihood", "ce"):
            run = tmp_path / "runs" / f"m{i}-{setting}"
            shutil.copytree(RESULTS / "alpha", run)
            doc = json.loads((run / "results.json").read_text("utf-8"))
            doc["model"]["name_or_path"] = f"some-organisation/Llama-3.1-8B-Instruct-variant-{i:02d}"
            doc["config"]["setting"] = setting
            for task in ("wic", "sa", "at", "faq", "ls", "rel", "sum"):  # the ten tasks: te's scores under seven more names,
                metric = tasks()[task].metrics[0].name  # each as a metric the task declares (the reader refuses others)
                doc["results"][task] = {p: {metric: s["acc"], "n": s["n"]} for p, s in doc["results"]["te"].items()}
            (run / "results.json").write_text(json.dumps(doc), "utf-8")
            paths.append(run / "results.json")
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "report", *map(str, paths), "--out", str(tmp_path / "report"),
                           "--bootstrap", "0", "--no-progress"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    md = (tmp_path / "report" / "report.md").read_text("utf-8")
    assert ("| model | wic | te | sa | hs | faq | at | ls | ner | rel | sum | AvgP | MaxP | CPS | Sharpe α=1 | rank score |"
            in md)
    assert md.count("| Llama-3.1-8B-Instruct-variant-00 [ce] | 72.92 | 72.92 |") == 1
    widths = {w["heading"]: w for w in table_widths(tmp_path / "report" / "report.html", 1280)}
    for heading in ("Summary", "Settings side by side"):
        assert widths[heading]["needs"] <= widths[heading]["given"], widths[heading]
    checked, broken = broken_words(tmp_path / "report" / "report.html", 1280, "td:first-child")
    assert checked > 24 and broken == []


def test_one_model_task_tables_drop_the_columns_that_repeat_its_score(tmp_path):
    report_mod.write_report([FILES[0]], tmp_path, k=0)
    md = (tmp_path / "report.md").read_text("utf-8")
    assert "| prompt | alpha-7b |\n| --- | ---: |\n| p1 | 75.00 |" in md  # no MinP/MaxP/AvgP/CPS of one number per prompt
    assert "| AvgP | 70.83 |" in md and "| CPS | 72.92 |" in md  # the model's own, over its prompts
    assert "| model | alpha-7b |\n| --- | --- |\n| name_or_path | org-a/alpha-7b |\n| dtype | bfloat16 |" in md  # transposed


def test_a_missing_chromium_fails_where_ci_requires_it(monkeypatch):
    import browser_layout

    monkeypatch.setattr(browser_layout, "CHROMIUM", None)
    monkeypatch.setenv(browser_layout.REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception, match="EVALITA_REQUIRE_CHROMIUM=1: the browser checks must run here"):
        browser_layout.require_chromium()
    monkeypatch.delenv(browser_layout.REQUIRE)
    with pytest.raises(pytest.skip.Exception, match="chromium not installed"):
        browser_layout.require_chromium()

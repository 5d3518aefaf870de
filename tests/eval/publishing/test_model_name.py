"""A model's name (eval/naming.py): ``--model-name`` on ``run`` is recorded and is how every output names the
model (console, report, card, front page, EEE); a local folder without one is its folder name and weights hash,
never the folder alone; ``push-results``/``export-eee --model-name`` override it; the name is no part of the
run's identity (a rerun under another name resumes the same run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from evalita_eval.cli import main

from paths import TEST_DATA

DATA = TEST_DATA / "build"
QUICK = ["--data", str(DATA), "--tasks", "wic", "--prompts", "p1", "--limit", "2", "--no-progress"]
NAME = "Tiny Test 1"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalita_eval.cli", *args], capture_output=True, text=True, cwd=cwd)


def _published(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_model_name_is_recorded_and_every_output_uses_it(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _cli("run", "--model", str(tiny_model), "--model-name", NAME, *QUICK, "--output-dir", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(f"model: {NAME}\n")
    doc = json.loads((out / "results.json").read_text("utf-8"))
    assert doc["model"]["name"] == NAME and doc["model"]["name_or_path"] == str(tiny_model)
    assert "name" not in doc["run_identity"]["model"]  # changes no number: not in the identity nor the cache key
    # another name, same run: resumed (nothing computed again), renamed
    again = CliRunner().invoke(main, ["run", "--model", str(tiny_model), "--model-name", "Renamed", *QUICK, "--output-dir", str(out)])
    assert again.exit_code == 0, again.output
    assert "0 requests computed" in again.output
    renamed = json.loads((out / "results.json").read_text("utf-8"))
    assert (renamed["run_id"], renamed["model"]["cache_key"], renamed["model"]["name"]) == (doc["run_id"], doc["model"]["cache_key"], "Renamed")
    (out / "results.json").write_text(json.dumps(doc), "utf-8")  # back to NAME

    report = _cli("report", str(out), "--out", str(tmp_path / "report"), "--bootstrap", "0", "--no-progress", cwd=tmp_path)
    assert report.returncode == 0, report.stderr[-2000:]
    report_md = (tmp_path / "report" / "report.md").read_text("utf-8")
    assert f"| {NAME} |" in report_md

    pushed = _cli("push-results", str(out), "--repo", "me/results", "--to-dir", str(tmp_path / "repo"), cwd=tmp_path)
    assert pushed.returncode == 0, pushed.stderr
    files = _published(tmp_path / "repo")
    # named by the run id its published identity hashes to (no local path in it: record/read.py, public.py)
    [folder] = [k.removesuffix("/results.json") for k in files if k.endswith("/results.json")]
    assert folder == f"Tiny_Test_1/loglikelihood-{json.loads(files[folder + '/results.json'])['run_id']}"
    assert files[f"{folder}/README.md"].decode().startswith(f"# Evalita-LLM results: {NAME} (local folder)")
    assert f"| {NAME} (local folder) |".encode() in files["README.md"]
    assert json.loads(files[f"{folder}/results.json"])["model"]["name"] == NAME

    exported = _cli("export-eee", str(out), str(tmp_path / "eee"), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    eee = _published(tmp_path / "eee")
    [aggregate] = [json.loads(v) for k, v in eee.items() if k.endswith(".json")]
    assert (aggregate["model_info"]["name"], aggregate["model_info"]["id"]) == (NAME, NAME)  # as its model-index names it
    # no published file names the model by its folder (nor holds its path); the local report names it by its
    # name, and shows the whole local path only in its "path" column
    for name, data in {**files, **eee}.items():
        assert tiny_model.name.encode() not in data, name
    assert f"| {tiny_model.name} |" not in report_md and report_md.count(tiny_model.name) == report_md.count(str(tiny_model))


def test_a_local_model_without_a_name_is_its_folder_and_weights_hash_and_publishing_overrides(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["run", "--model", str(tiny_model), *QUICK, "--output-dir", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "results.json").read_text("utf-8"))
    default = f"{tiny_model.name}-{doc['model']['files_sha256'][:8]}"
    assert doc["model"]["name"] == default and f"model: {default}\n" in result.output
    pushed = _cli("push-results", str(out), "--repo", "me/results", "--to-dir", str(tmp_path / "repo"), "--model-name", "Given Later",
                  cwd=tmp_path)
    assert pushed.returncode == 0, pushed.stderr
    [folder] = (tmp_path / "repo" / "Given_Later").iterdir()  # named by its published run id (no local path in it)
    assert folder.name == f"loglikelihood-{json.loads((folder / 'results.json').read_text('utf-8'))['run_id']}" != f"loglikelihood-{doc['run_id']}"
    card = (folder / "README.md").read_text("utf-8")
    assert card.startswith("# Evalita-LLM results: Given Later (local folder)")
    exported = CliRunner().invoke(main, ["export-eee", str(out), str(tmp_path / "eee"), "--model-name", "Given Later"])
    assert exported.exit_code == 0, exported.output
    assert (tmp_path / "eee" / "data" / "evalita-llm" / "local" / "Given_Later").is_dir()
    bad = _cli("run", "--model", str(tiny_model), "--model-name", " ", *QUICK, cwd=tmp_path)
    assert bad.returncode == 2 and "--model-name ' ': expected a non-empty name on one line" in bad.stderr


# Raw HTML, a script and matplotlib's mathtext in one name (issue 45).
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)> $x^{"


def _rendered(markdown: str) -> str:
    """The HTML a CommonMark renderer that passes raw HTML through makes of ``markdown`` (GFM tables on)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def test_a_hostile_name_is_text_in_every_markdown_and_plot(tiny_model: Path, tmp_path: Path) -> None:
    """The name reaches report.md, the run card and the front page escaped: rendered, no tag of it is HTML, and the
    reader sees it as given; the plots draw it as text (no mathtext), so report writes its report."""
    out = tmp_path / "run"
    proc = _cli("run", "--model", str(tiny_model), "--model-name", HOSTILE, *QUICK, "--output-dir", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = _cli("report", str(out), "--out", str(tmp_path / "report"), "--bootstrap", "0", "--no-progress", cwd=tmp_path)
    assert report.returncode == 0, report.stderr[-2000:]
    pushed = _cli("push-results", str(out), "--repo", "me/results", "--to-dir", str(tmp_path / "repo"), cwd=tmp_path)
    assert pushed.returncode == 0, pushed.stderr
    markdowns = {"report.md": (tmp_path / "report" / "report.md").read_text("utf-8"),
                 **{k: v.decode() for k, v in _published(tmp_path / "repo").items() if k.endswith(".md")}}
    assert len(markdowns) == 3  # report.md, the run card, the front page
    shown = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt; $x^{"
    for name, text in markdowns.items():
        html = _rendered(text)
        assert "<script" not in html and "<img src=x" not in html and shown in html, name



def test_a_bare_relative_or_absolute_model_folder_publishes_under_one_name(tiny_model: Path, tmp_path: Path) -> None:
    """``--model tiny`` from its parent folder, ``./tiny``, ``../m/tiny`` and the absolute path all push and export
    (a bare folder name inside words is no local path); a given name holding the folder name is never doubled."""
    import shutil

    shutil.copytree(tiny_model, tmp_path / "m" / "tiny")
    (tmp_path / "w").mkdir()
    cases = [("tiny", "m", None), ("./tiny", "m", None), ("../m/tiny", "w", None), (str(tmp_path / "m" / "tiny"), "w", None),
             ("tiny", "m", "someorg/tiny-chat")]
    for i, (model, cwd, given) in enumerate(cases):
        out = tmp_path / f"run{i}"
        named = ["--model-name", given] if given else []
        proc = _cli("run", "--model", model, *named, *QUICK, "--output-dir", str(out), cwd=tmp_path / cwd)
        assert proc.returncode == 0, proc.stderr[-2000:]
        name = json.loads((out / "results.json").read_text("utf-8"))["model"]["name"]
        assert name == given or name.startswith("tiny-") and len(name) == len("tiny-") + 8, name
        pushed = _cli("push-results", str(out), "--repo", "me/results", "--to-dir", str(tmp_path / f"repo{i}"), cwd=tmp_path / cwd)
        assert pushed.returncode == 0, (model, pushed.stderr)
        exported = _cli("export-eee", str(out), str(tmp_path / f"eee{i}"), cwd=tmp_path / cwd)
        assert exported.returncode == 0, (model, exported.stderr)
        [aggregate] = [json.loads(v) for k, v in _published(tmp_path / f"eee{i}").items() if k.endswith(".json")]
        assert aggregate["model_info"]["name"] == name, model
        [results] = [json.loads(v) for k, v in _published(tmp_path / f"repo{i}").items() if k.endswith("results.json")]
        assert results["model"]["name"] == name and str(tmp_path) not in json.dumps(results), model

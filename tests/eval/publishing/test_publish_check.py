"""Derived, never trusted (issue 36): before publishing, every text field is checked for local paths, home
folders and the user's name; a file that still holds one is refused with one line naming the file and field."""

from __future__ import annotations

import getpass
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_eval.cli import main
from evalita_eval.publishing.public import local_trace

from paths import TEST_DATA
from publish_fixtures import repo_folder

RUN = TEST_DATA / "results" / "beta"


def _run_with(tmp: Path, edit) -> Path:
    run = tmp / "run"
    shutil.copytree(RUN, run)
    doc = json.loads((run / "results.json").read_text("utf-8"))
    edit(doc)
    (run / "results.json").write_text(json.dumps(doc), "utf-8")
    return run


@pytest.mark.parametrize(("field", "edit", "trace"), [
    ("config.system_instruction", lambda d: d["config"].update(system_instruction="Leggi /home/alice/istruzioni.txt e rispondi."),
     "/home/alice/istruzioni.txt"),
    ("versions.evalita_eval", lambda d: d["versions"].update(evalita_eval="0.1.0 (from /opt/build/evalita)"), "/opt/build/evalita"),
    ("skipped.sa", lambda d: d.update(skipped={"sa": "weights copied from ~/models/beta"}), "~/"),
])
def test_a_local_path_in_any_field_is_refused_naming_the_field(tmp_path: Path, field: str, edit, trace: str) -> None:
    run = _run_with(tmp_path, edit)
    out = tmp_path / "repo"
    proc = subprocess.run([sys.executable, "-m", "evalita_eval.cli", "push-results", str(run), "--repo", "me/results", "--to-dir", str(out)],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 1
    assert proc.stderr.strip() == (f"error: {repo_folder(run)}/results.json: {field} holds {trace!r}, a local path or user name; "
                                   "remove it from the run's results.json, then publish again")
    assert not out.exists()  # nothing written
    # EEE exports none of these fields: written, and the trace is in none of its files
    eee = CliRunner().invoke(main, ["export-eee", str(run), str(tmp_path / "eee")])
    assert eee.exit_code == 0, eee.output
    assert not [p for p in (tmp_path / "eee").rglob("*") if p.is_file() and trace.encode() in p.read_bytes()]


def test_export_eee_refuses_a_local_path_in_a_field_it_exports(tmp_path: Path) -> None:
    run = _run_with(tmp_path, lambda d: d["model"].update(revision="/home/alice/ckpt"))
    eee = CliRunner().invoke(main, ["export-eee", str(run), str(tmp_path / "eee")])
    assert eee.exit_code == 1 and eee.output.count("\n") == 1
    # the first exported field that holds it: model_args (lm-eval's form, revision=... inside it) or revision itself
    assert re.search(r"\.json: model_info\.additional_details\.(revision|model_args) holds '[^']*/home/alice/ckpt[^']*', a local "
                     r"path or user name; remove it from the run's results\.json, then publish again\n$", eee.output), eee.output
    assert not (tmp_path / "eee").exists()


def test_what_is_and_is_not_a_local_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    found = {text: local_trace(text) for text in (
        "tokens/s", "</s>", "https://huggingface.co/datasets/a/b", "n 1/2", "python 3.11.7", "rel p1", "Rispondi: /root",
        "see /work/main/x.", "C:\\Users\\bob", "\"/tmp/a\"")}
    assert found == {"tokens/s": None, "</s>": None, "https://huggingface.co/datasets/a/b": None, "n 1/2": None,
                     "python 3.11.7": None, "rel p1": None, "Rispondi: /root": "/root", "see /work/main/x.": "/work/main/x.",
                     "C:\\Users\\bob": "C:\\", "\"/tmp/a\"": "/tmp/a"}
    monkeypatch.setattr(getpass, "getuser", lambda: "alice")
    assert local_trace("run by alice on her laptop") == "alice" and local_trace("malice") is None
    monkeypatch.setattr(getpass, "getuser", lambda: "root")  # a generic account name: no trace of anyone
    assert local_trace("the root of the tree") is None

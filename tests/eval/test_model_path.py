"""--model checked before anything heavy (eval/model_path.py): a folder that is not a model, a weights file given
instead of its folder, a GGUF without its loader's packages: each one line saying what to pass, and neither torch
nor transformers imported (so no weights read)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evalita_eval.cli import main
from evalita_eval.model_path import ModelPathError, check_model_path

from paths import ROOT, TEST_DATA

DATA = TEST_DATA / "build"
# Runs `evalita-eval run` in a fresh interpreter, then says which heavy modules it imported.
DRIVER = """import sys
from evalita_eval.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print("imported:", [m for m in ("torch", "transformers", "safetensors") if m in sys.modules], "exit", code)
"""


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", DRIVER, "run", *args, "--data", str(DATA), "--tasks", "te"],
                          capture_output=True, text=True, cwd=cwd, env=env)


@pytest.fixture
def model_folder(tmp_path: Path) -> Path:
    """A model folder whose 'weights' are a 3 GB sparse file: reading it would be the defect."""
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}), "utf-8")
    with open(folder / "model.safetensors", "wb") as fh:
        fh.truncate(3 << 30)
    return folder


def one_error(proc: subprocess.CompletedProcess) -> str:
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("Error")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.strip().startswith("imported: [] exit 2"), proc.stdout  # nothing heavy loaded
    return errors[0]


def test_a_data_folder_is_not_a_model() -> None:
    line = one_error(run_cli("--model", "raw/sa"))
    assert line == ("Error: Invalid value for --model: raw/sa is not a model folder: no config.json in it (pass a Hugging Face "
                    "model folder, with config.json and the weights, a .gguf file, or a Hub id such as org/name)")


def test_a_weights_file_names_its_folder(model_folder: Path) -> None:
    line = one_error(run_cli("--model", "plain/model.safetensors", cwd=model_folder.parent))
    assert line == ("Error: Invalid value for --model: plain/model.safetensors is a file: pass the model folder that "
                    "holds it and its config.json: --model plain")
    line = one_error(run_cli("--model", str(model_folder / "config.json")))
    assert line.endswith(f"--model {model_folder}")


def test_folders_that_hold_a_model_name_it(tmp_path: Path, model_folder: Path, monkeypatch) -> None:
    # the quickstart's .real-model/: the converted folder and the GGUF are inside it
    with pytest.raises(ModelPathError, match=r"^m has no config.json, but plain inside it is a model folder: --model m/plain$"):
        (tmp_path / "m").mkdir()
        model_folder.rename(tmp_path / "m" / "plain")
        monkeypatch.chdir(tmp_path)
        check_model_path("m")
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "S.Q4_1.gguf").write_bytes(b"GGUF")
    with pytest.raises(ModelPathError, match=r"^g has no config.json; it holds S.Q4_1.gguf: pass the GGUF file itself: --model g/S.Q4_1.gguf$"):
        check_model_path("g")
    check_model_path("g", ["gguf_file=S.Q4_1.gguf"])  # a folder and the GGUF inside it: what transformers takes
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("[1, 2", "utf-8")
    with pytest.raises(ModelPathError, match=r"config.json: not a JSON object, so bad is not a usable model folder$"):
        check_model_path("bad")


def test_hub_ids_and_model_folders_pass(model_folder: Path) -> None:
    check_model_path(str(model_folder))
    check_model_path("HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(ModelPathError, match="no such model folder"):
        check_model_path("./nope")


@pytest.mark.parametrize("absent, hint", [
    ("accelerate", "needs accelerate (transformers loads GGUF files with it): pip install -e '.[gguf]' (in a clone of evalita-llm)"),
    ("gguf", "needs the gguf package: pip install -e '.[gguf]' (in a clone of evalita-llm)"),
])
def test_a_gguf_without_its_loaders_packages_is_an_install_hint(tmp_path: Path, monkeypatch, absent: str, hint: str) -> None:
    import importlib.util

    gguf = tmp_path / "S.Q4_1.gguf"
    gguf.write_bytes(b"GGUF")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == absent else real(name, *a))
    result = CliRunner().invoke(main, ["run", "--model", str(gguf), "--data", str(DATA), "--tasks", "te"])
    assert result.exit_code == 1
    errors = [ln for ln in result.output.splitlines() if ln.startswith("Error")]
    assert errors == [f"Error: --model {gguf} {hint}"], result.output

"""The README quickstart that .ci/run runs verbatim (scripts/readme_quickstart.py), and the extras it installs:
every module the block's commands import must come with the extras its pip line names (issue 32: the gguf
extra lacked accelerate, so `convert` failed in a fresh venv while CI, installing [all], passed)."""

from __future__ import annotations

import importlib.util
import json
import re
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from paths import ROOT

import pytest

from evalita_eval.cli.support import RUN_NEEDS, STATS_NEEDS
from evalita_eval.model_path import GGUF_NEEDS



def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


quickstart = _load("readme_quickstart")
real_model = _load("real_model")
BLOCK = quickstart.quickstart_block((ROOT / "README.md").read_text("utf-8"))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
# torch is named on the block's pip line itself (the CPU wheel), not by an extra.
SEPARATE = {"torch"}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def installed_by(pyproject: dict, extras: set[str]) -> set[str]:
    """Distributions `pip install '.[extras]'` installs directly: the core dependencies and each extra's, recursively."""
    project = pyproject["project"]
    names = {_name(r) for r in project["dependencies"]}
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for req in project["optional-dependencies"].get(extra, []):
            if _name(req) == project["name"]:
                todo += re.search(r"\[(.*)\]", req).group(1).split(",")
            else:
                names.add(_name(req))
    return names


def distributions_of(module: str) -> set[str]:
    """The distributions that provide an import name (sklearn -> scikit-learn); the name itself when none is installed."""
    return {d.lower().replace("_", "-") for d in packages_distributions().get(module, [module])}


def missing_modules(pyproject: dict, extras: set[str], modules: set[str]) -> list[str]:
    have = installed_by(pyproject, extras)
    return sorted(m for m in modules - SEPARATE if not distributions_of(m) & have)


def block_needs(block: str) -> set[str]:
    """What the block's commands import: convert, and run (with the GGUF loader: README says --model X.gguf works too)."""
    needs: set[str] = set()
    if "scripts/real_model.py convert" in block:
        needs |= set(real_model.CONVERT_NEEDS)
    if "evalita-eval run" in block:
        needs |= set(RUN_NEEDS) | set(GGUF_NEEDS)
    return needs


def block_extras(block: str) -> set[str]:
    pip = next(line for line in block.splitlines() if "pip install" in line)
    assert "torch==2.13.0" in pip  # SEPARATE: the block installs torch itself
    return set(re.search(r"'\.\[([\w,-]+)\]'", pip).group(1).split(","))


def test_the_block_is_read_from_the_readme() -> None:
    lines = BLOCK.splitlines()
    assert lines[0].startswith("python3 -m venv .venv && .venv/bin/pip install")
    assert any(line.startswith(".venv/bin/evalita-eval run ") for line in lines)
    assert quickstart.results_path(BLOCK) == "results/smollm2/results.json"
    with pytest.raises(quickstart.QuickstartError, match="no '## Quickstart' heading"):
        quickstart.quickstart_block("# x\n```bash\necho\n```\n")
    with pytest.raises(quickstart.QuickstartError, match="no ```bash block"):  # a block of the next section is not it
        quickstart.quickstart_block("## Quickstart\ntext\n## Next\n```bash\necho\n```\n")


def test_the_quickstart_extras_install_what_its_commands_import() -> None:
    assert block_needs(BLOCK) >= {"transformers", "gguf", "accelerate", "sklearn"}
    assert missing_modules(PYPROJECT, block_extras(BLOCK), block_needs(BLOCK)) == []
    assert missing_modules(PYPROJECT, {"gguf"}, set(GGUF_NEEDS)) == []
    assert missing_modules(PYPROJECT, {"eval"}, set(RUN_NEEDS) | set(STATS_NEEDS)) == []


def test_an_extra_without_a_dependency_fails_the_check() -> None:
    """The defect of issue 32, put back: the gguf extra without accelerate."""
    broken = json.loads(json.dumps(PYPROJECT))
    broken["project"]["optional-dependencies"]["gguf"] = [r for r in broken["project"]["optional-dependencies"]["gguf"]
                                                          if _name(r) != "accelerate"]
    assert missing_modules(broken, block_extras(BLOCK), block_needs(BLOCK)) == ["accelerate"]
    broken["project"]["optional-dependencies"]["eval"].remove(next(r for r in PYPROJECT["project"]["optional-dependencies"]["eval"]
                                                                    if _name(r) == "scikit-learn"))
    assert missing_modules(broken, {"eval"}, set(RUN_NEEDS)) == ["sklearn"]


def test_check_results_wants_a_complete_run(tmp_path: Path) -> None:
    path = tmp_path / "results" / "smollm2" / "results.json"
    with pytest.raises(quickstart.QuickstartError, match="wrote no results.json"):
        quickstart.check_results(tmp_path, BLOCK)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"status": "partial", "results": {"wic": {}}}), "utf-8")
    with pytest.raises(quickstart.QuickstartError, match="status 'partial' with 1 task"):
        quickstart.check_results(tmp_path, BLOCK)
    path.write_text(json.dumps({"status": "complete", "results": {"wic": {}}, "comparable_with_paper": False}), "utf-8")
    assert quickstart.check_results(tmp_path, BLOCK).endswith("complete, 1 tasks, comparable_with_paper False")

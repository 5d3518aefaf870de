"""The layers of the two packages: the data side (``evalita_data``) loads without the
evaluator, and no module of the project imports, directly or through others, itself.

The import graph is built from the source with ``ast``: every ``import``/``from ... import``
of a project module is an edge, at module level and inside functions alike (an import
deferred into a function still closes a cycle, it only hides it until the call).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def project_modules() -> dict[str, Path]:
    """Module name -> file, for every package pyproject.toml installs (package-dir mapping included)."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]
    dirs = setup.get("package-dir", {})
    modules: dict[str, Path] = {}
    for package in setup["packages"]:
        folder = ROOT / dirs[package] if package in dirs else ROOT / Path(*package.split("."))
        if package not in dirs and package.split(".")[0] in dirs:  # a subpackage of a mapped package
            top = package.split(".")[0]
            folder = ROOT / dirs[top] / Path(*package.split(".")[1:])
        for path in sorted(folder.glob("*.py")):
            modules[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return modules


def _target(name: str, modules: dict[str, Path]) -> str | None:
    """The project module an imported dotted name is (or lies in): its longest module prefix."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    return None


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.stem == "__init__" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # "from P import x": the submodule P.x if there is one, else an attribute of P.
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for name in names:
                target = _target(name, modules)
                if target is None or target == module:
                    continue
                graph[module].add(target)
                # Importing a.b.c runs the packages a and a.b first, unless the importer is inside them.
                parts = target.split(".")
                for n in range(1, len(parts)):
                    parent = ".".join(parts[:n])
                    if parent in modules and not module.startswith(parent + ".") and parent != module:
                        graph[module].add(parent)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the directed graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def _package_of(module: str, modules: dict[str, Path]) -> str:
    return module if modules[module].stem == "__init__" else module.rpartition(".")[0]


def package_graph(graph: dict[str, set[str]], modules: dict[str, Path]) -> dict[str, set[str]]:
    """Edges between packages neither of which contains the other (evalita_eval.fast -> evalita_eval.backends)."""
    out: dict[str, set[str]] = {}
    for src, targets in graph.items():
        a = _package_of(src, modules)
        for dst in targets:
            b = _package_of(dst, modules)
            if not (a == b or a.startswith(b + ".") or b.startswith(a + ".")):
                out.setdefault(a, set()).add(b)
    return out


def test_the_graph_sees_the_packages_and_their_imports() -> None:
    modules = project_modules()
    graph = import_graph(modules)
    # The mapped folders (converters/ -> evalita_data.converters, eval/ -> evalita_eval) are read.
    assert {"evalita_data.converters.ner", "evalita_eval.running.runner", "evalita_eval.fast.encode", "evalita_data.scoring.metrics"} <= set(modules)
    assert "evalita_data.taskspec" in graph["evalita_eval.settings.instruct"]  # from evalita_data.taskspec import ...
    assert "evalita_eval.api" in graph["evalita_eval.backends.hf"]  # from ..api import ...
    assert "evalita_eval.backends" in graph["evalita_eval.backends.hf"]  # from . import register_backend
    assert "evalita_data.registry" in graph["evalita_eval.metrics"]
    # Function-level imports count: registry imports the tasks package inside _builtin_modules.
    assert "evalita_data.tasks" in graph["evalita_data.registry"]
    # The cycle finder finds a planted cycle.
    assert find_cycle({**graph, "evalita_data.taskspec": graph["evalita_data.taskspec"] | {"evalita_eval.settings.instruct"}})


def test_no_import_cycle_among_modules() -> None:
    graph = import_graph(project_modules())
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_no_import_cycle_among_sibling_packages() -> None:
    modules = project_modules()
    packages = package_graph(import_graph(modules), modules)
    assert find_cycle(packages) is None, " -> ".join(find_cycle(packages) or [])


def test_the_data_package_imports_nothing_of_the_evaluator() -> None:
    graph = import_graph(project_modules())
    offenders = {m: sorted(t for t in targets if t.startswith("evalita_eval")) for m, targets in graph.items() if m.startswith("evalita_data")}
    assert {m: t for m, t in offenders.items() if t} == {}


def test_loading_the_registry_loads_no_evaluator_module() -> None:
    code = ("import json, sys; import evalita_data.registry as r; r.tasks(); "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('evalita_eval', 'torch', 'sklearn', 'transformers'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(out.stdout) == []


# The evaluator's rooms and which other rooms each may import (any of them may import the
# data package and the evaluator's top-level modules: api, metrics, naming). A new edge is a
# design decision: declare it here and in the README's layout table.
EVALUATOR_ROOMS = {
    "evalita_eval.backend_support": set(),
    "evalita_eval.fast": {"evalita_eval.backend_support"},
    "evalita_eval.backends": {"evalita_eval.fast", "evalita_eval.backend_support"},
    "evalita_eval.sources": set(),
    "evalita_eval.settings": set(),
    "evalita_eval.reporting": set(),
    "evalita_eval.running": {"evalita_eval.backend_support", "evalita_eval.settings", "evalita_eval.reporting", "evalita_eval.sources"},
    "evalita_eval.publishing": {"evalita_eval.reporting", "evalita_eval.sources"},
    "evalita_eval.replicas": {"evalita_eval.backends"},  # replicas of a backend on Ray (docs/parallel.md)
}


def test_each_evaluator_room_imports_only_the_rooms_it_declares() -> None:
    modules = project_modules()
    rooms = {p for p in modules if p.count(".") == 1 and p.startswith("evalita_eval.") and modules[p].stem == "__init__"}
    assert rooms == set(EVALUATOR_ROOMS), "a subpackage of eval/ is missing from EVALUATOR_ROOMS (or gone)"
    undeclared = {}
    for src, targets in package_graph(import_graph(modules), modules).items():
        room = next((r for r in EVALUATOR_ROOMS if src == r or src.startswith(r + ".")), None)
        if room is None:
            continue
        extra = {t for t in targets if t in rooms and t != room} - EVALUATOR_ROOMS[room]
        if extra:
            undeclared[src] = sorted(extra)
    assert undeclared == {}
    # The check sees an edge: running imports sources.
    assert "evalita_eval.sources" in package_graph(import_graph(modules), modules)["evalita_eval.running"]


def test_reports_publishing_and_sources_load_no_model_library() -> None:
    # `report`, `compare`, `push-results` and reading data run on a machine without torch.
    code = ("import json, sys; import evalita_eval.reporting.report, evalita_eval.reporting.compare, evalita_eval.publishing.push_results, "
            "evalita_eval.publishing.export_lm_eval, evalita_eval.sources.folder, evalita_eval.sources.hub, evalita_eval.sources.official; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'vllm') "
            "or m.startswith(('evalita_eval.backends', 'evalita_eval.fast', 'evalita_eval.backend_support', 'evalita_eval.running')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(out.stdout) == []

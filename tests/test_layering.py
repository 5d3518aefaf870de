"""The layers of the two packages: the data side (``evalita_data``) loads without the
evaluator, the evaluator's rooms are ordered in layers (``LAYERS``, bottom to top) and no import
runs up them, and no module of the project imports, directly or through others, itself.

The import graph is built from the source with ``ast``: every ``import``/``from ... import``
of a project module is an edge, at module level and inside functions alike (an import
deferred into a function still closes a cycle, it only hides it until the call), and so is an
``importlib.import_module`` of a written-out name. A command run as a subprocess
(``python -m evalita_eval.cli`` by the sweep) is not an import.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

ROOT = Path(__file__).resolve().parent.parent

# The layers of the evaluator, bottom to top: the one place that says what may import what. A
# module may import its own room and the rooms of lower layers, never a room of its own layer or
# a higher one. A room is a subpackage or module of eval/ (the longest one naming a module wins:
# settings.answers is its own room). Renaming or moving a room is an edit here; a new room must
# be placed here (a test fails until it is).
LAYERS: list[tuple[str, ...]] = [
    ("evalita_data",),  # the data toolkit: it imports nothing of the evaluator
    # The evaluator's foundations: the version, the backend contract, output-folder names, the
    # text rules that read answers, the reader of option files (run --config, sweeps).
    ("evalita_eval", "evalita_eval.api", "evalita_eval.naming", "evalita_eval.settings.answers", "evalita_eval.config_file"),
    # The tasks' metrics and the open-ended one (reads answers.normalize).
    ("evalita_eval.metrics",),
    # The run record (results.json and samples: their schemas and their one reader, docs/run-record.md): its reader
    # recomputes each score from the samples with the metrics.
    ("evalita_eval.record",),
    # What backends share about a model; what is sent to the model; where data come from; reports of
    # finished runs. None loads another: reports and data reading never load torch.
    ("evalita_eval.backend_support", "evalita_eval.settings", "evalita_eval.sources", "evalita_eval.reporting"),
    # --model checks; the publishing commands; the runner (task kinds, plan, cache).
    ("evalita_eval.model_path", "evalita_eval.publishing", "evalita_eval.running"),
    ("evalita_eval.backends",),  # the engines (the constrained-decoding one included)
    ("evalita_eval.replicas",),  # replicas of a backend on Ray (docs/parallel.md)
    # One typed run config (run --config, sweep runs); a sweep file's runs and their identity; the sweep on Ray.
    ("evalita_eval.run_config",),
    ("evalita_eval.sweep_runs",),
    ("evalita_eval.sweep",),
    # The `evalita-eval` command (the package eval/cli/): what the commands share; run (its options
    # and input checks); the command table.
    ("evalita_eval.cli.support",),
    ("evalita_eval.cli.run",),
    ("evalita_eval.cli",),  # the package: the command table (__init__) and ``python -m`` (__main__)
]
# The evaluator's package is the room of its own __init__ only (the version): every other module
# of eval/ is placed by its own room.
EVALUATOR = "evalita_eval"


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


@dataclass(frozen=True)
class Import:
    module: str  # the importer
    path: Path
    line: int
    target: str  # the project module imported (or the one it lies in)


def _dynamic_target(call: ast.Call, module: str) -> str | None:
    """The module name an ``importlib.import_module(...)`` / ``__import__(...)`` call names, as far as
    its first argument is written out: a string, or an f-string whose leading part is one (or
    ``__name__``, the importer itself)."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "__import__") or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values:
        head = arg.values[0]
        if isinstance(head, ast.FormattedValue) and isinstance(head.value, ast.Name) and head.value.id == "__name__":
            return module
        if isinstance(head, ast.Constant) and isinstance(head.value, str):
            return head.value.rstrip(".")
    return None


def explicit_imports(modules: dict[str, Path]) -> list[Import]:
    """Every import statement (module level or in a function) and ``import_module`` call of a project
    module, with its file and line. Unlike ``import_graph``, the packages an import runs first are
    not edges of their own: ``from ..settings.answers import x`` is an import of that module."""
    found: list[Import] = []
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
            elif isinstance(node, ast.Call) and (dynamic := _dynamic_target(node, module)):
                names = [dynamic]
            for name in names:
                target = _target(name, modules)
                if target is not None and target != module:
                    found.append(Import(module, path, node.lineno, target))
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules importing it runs: those it imports and the packages holding them
    (importing a.b.c runs the packages a and a.b first, unless the importer is inside them)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for imp in explicit_imports(modules):
        graph[imp.module].add(imp.target)
        parts = imp.target.split(".")
        for n in range(1, len(parts)):
            parent = ".".join(parts[:n])
            if parent in modules and not imp.module.startswith(parent + ".") and parent != imp.module:
                graph[imp.module].add(parent)
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
    """Edges between packages neither of which contains the other (evalita_eval.replicas -> evalita_eval.backends)."""
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
    assert {"evalita_data.converters.ner", "evalita_eval.running.runner", "evalita_eval.backends.hf_batches", "evalita_data.scoring.metrics"} <= set(modules)
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


def layer_index() -> dict[str, int]:
    """Room -> its layer's position (0 at the bottom); a room named twice is an error."""
    index: dict[str, int] = {}
    for n, layer in enumerate(LAYERS):
        for room in layer:
            assert room not in index, f"{room} is in two layers of LAYERS"
            index[room] = n
    return index


def room_of(module: str, rooms: Iterable[str]) -> str | None:
    """The room of a module: the longest room that is the module or a package holding it."""
    holding = [r for r in rooms if module == r or (module.startswith(r + ".") and r != EVALUATOR)]
    return max(holding, key=len, default=None)


def layering_violations(imports: Iterable[Import], layers: list[tuple[str, ...]]) -> list[str]:
    """One line per import that runs up the layers or sideways to another room of its own layer
    (``file:line: importer (layer n: room) imports target (layer m: room), ...``), or whose importer
    or target lies in no layer."""
    index = {room: n for n, layer in enumerate(layers) for room in layer}
    out = []
    for imp in imports:
        src, dst = room_of(imp.module, index), room_of(imp.target, index)
        where = f"{imp.path.relative_to(ROOT) if imp.path.is_relative_to(ROOT) else imp.path}:{imp.line}"
        if src is None or dst is None:
            out.append(f"{where}: {imp.module if src is None else imp.target} is in no layer of LAYERS: place it there")
        elif index[dst] > index[src] or (index[dst] == index[src] and dst != src):
            out.append(f"{where}: {imp.module} (layer {index[src]}: {src}) imports {imp.target} "
                       f"(layer {index[dst]}: {dst}), " + ("a higher layer" if index[dst] > index[src] else "another room of its layer"))
    return out


def test_every_evaluator_module_lies_in_a_layer() -> None:
    modules = project_modules()
    index = layer_index()
    unplaced = sorted(m for m in modules if room_of(m, index) is None)
    assert unplaced == [], f"modules in no layer of LAYERS (place each one there): {unplaced}"
    # Every room names something that exists: a renamed package is renamed here too.
    assert sorted(r for r in index if r not in modules) == []


def test_no_import_runs_up_the_layers() -> None:
    violations = layering_violations(explicit_imports(project_modules()), LAYERS)
    assert violations == [], "\n".join(violations)


def test_the_layer_check_sees_what_it_must_refuse(tmp_path: Path) -> None:
    modules = project_modules()
    imports = explicit_imports(modules)
    index = layer_index()
    # Imports inside functions count: the CLI's `run` loads the runner when it runs.
    assert any(i.module == "evalita_eval.cli.run" and i.target == "evalita_eval.running.runner" for i in imports)
    # import_module calls: a written-out name, and the importer's own name (the backends registry loads its modules).
    call = ast.parse('importlib.import_module(f"{__name__}.{info.name}"); import_module("evalita_eval.running.plan")').body
    assert [_dynamic_target(c.value, "evalita_eval.backends") for c in call] == ["evalita_eval.backends", "evalita_eval.running.plan"]
    assert room_of("evalita_eval.settings.answers", index) == "evalita_eval.settings.answers"
    assert room_of("evalita_eval.settings.instruct", index) == "evalita_eval.settings"
    assert room_of("evalita_eval.cli.run", index) == "evalita_eval.cli.run"  # not the room of its package evalita_eval.cli
    assert room_of("evalita_eval.cli.__main__", index) == "evalita_eval.cli"
    assert room_of("evalita_eval.newmodule", index) is None  # the root package holds no module but its own
    # Planted modules: a room importing a higher one (deferred, relative and through import_module),
    # the data side importing the evaluator, and a module in no layer, each named with file and line.
    planted = {"evalita_eval.reporting.planted": "def f():\n    from ..running import runner\n",
               "evalita_eval.sources.planted": "import importlib\nimportlib.import_module('evalita_eval.backends.hf')\n",
               "evalita_data.planted": "\n\nimport evalita_eval.metrics\n",
               "evalita_eval.planted": "from . import api\n",
               "evalita_eval.reporting.planted2": "from ..sources import base\n",
               "evalita_eval.running.planted": "from ..reporting import report\n"}  # downward: allowed
    for name, source in planted.items():
        path = tmp_path / f"{name}.py"
        path.write_text(source, "utf-8")
        modules = {**modules, name: path}
    found = layering_violations([i for i in explicit_imports(modules) if ".planted" in i.module], LAYERS)
    assert found == [
        f"{tmp_path}/evalita_eval.reporting.planted.py:2: evalita_eval.reporting.planted (layer 4: evalita_eval.reporting) "
        "imports evalita_eval.running.runner (layer 5: evalita_eval.running), a higher layer",
        f"{tmp_path}/evalita_eval.sources.planted.py:2: evalita_eval.sources.planted (layer 4: evalita_eval.sources) "
        "imports evalita_eval.backends.hf (layer 6: evalita_eval.backends), a higher layer",
        f"{tmp_path}/evalita_data.planted.py:3: evalita_data.planted (layer 0: evalita_data) "
        "imports evalita_eval.metrics (layer 2: evalita_eval.metrics), a higher layer",
        f"{tmp_path}/evalita_eval.planted.py:1: evalita_eval.planted is in no layer of LAYERS: place it there",
        f"{tmp_path}/evalita_eval.reporting.planted2.py:1: evalita_eval.reporting.planted2 (layer 4: evalita_eval.reporting) "
        "imports evalita_eval.sources.base (layer 4: evalita_eval.sources), another room of its layer",
    ]


def test_reports_publishing_and_sources_load_no_model_library() -> None:
    # `report`, `compare`, `push-results` and reading data run on a machine without torch.
    code = ("import json, sys; import evalita_eval.reporting.report, evalita_eval.reporting.compare, evalita_eval.publishing.push_results, "
            "evalita_eval.publishing.export_lm_eval, evalita_eval.sources.folder, evalita_eval.sources.hub, evalita_eval.sources.official; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers', 'vllm') "
            "or m.startswith(('evalita_eval.backends', 'evalita_eval.backend_support', 'evalita_eval.running')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert json.loads(out.stdout) == []

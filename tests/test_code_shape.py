"""The shape of the evaluator's code (issue 29): no function of ``eval/`` over 60 lines, no module
over 400, and no branch on a task's ``output_type`` or a run's ``setting`` outside the task-kind
objects, which are the one place that tells the kinds of task apart (the rest asks them).

Read from the source with ``ast``: a function counts from its first decorator to its last line
(methods and nested functions each count, as well as inside their parent); a branch is a
comparison (``==``, ``!=``, ``in``, ``not in``) or a ``match`` one side of which is a name or
attribute called ``output_type`` or ``setting`` (or a ``["setting"]`` / ``.get("setting")`` read).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EVAL = ROOT / "eval"
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400
KIND_NAMES = frozenset({"output_type", "setting"})
# The modules (relative to eval/) where a branch on the kind of task is the design, and why.
# eval/settings/instruct.py needs no entry: each generative setting is declared once
# (InstructSetting) and looked up by name, never compared.
KIND_BRANCHES_ALLOWED = {
    "running/task_kinds.py": "task_kind(): the one dispatch from (output_type, setting) to the object of that kind of task",
}
_COMPARISONS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def eval_modules() -> dict[str, str]:
    """Path relative to eval/ -> source, for every module of the evaluator."""
    return {p.relative_to(EVAL).as_posix(): p.read_text("utf-8") for p in sorted(EVAL.rglob("*.py"))}


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``name:line (n lines)`` of every function over ``limit`` lines, decorators included."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            length = node.end_lineno - start + 1  # type: ignore[operator]
            if length > limit:
                out.append((node.lineno, f"{node.name}:{node.lineno} ({length} lines)"))
    return [text for _line, text in sorted(out)]


def _is_kind(node: ast.expr) -> bool:
    """A read of output_type or setting: ``x``, ``a.x``, ``a["x"]``, ``a.get("x", ...)``."""
    if isinstance(node, ast.Name):
        return node.id in KIND_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in KIND_NAMES
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value in KIND_NAMES
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        return isinstance(node.args[0], ast.Constant) and node.args[0].value in KIND_NAMES
    return False


def kind_branches(source: str) -> list[str]:
    """``line: code`` of every comparison or ``match`` on output_type or setting."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(op, _COMPARISONS) for op in node.ops):
            if any(_is_kind(side) for side in [node.left, *node.comparators]):
                out.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Match) and _is_kind(node.subject):
            out.append((node.lineno, f"match {ast.unparse(node.subject)}"))
    return [f"{line}: {code}" for line, code in sorted(out)]


def test_the_checks_see_what_they_must_refuse() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(58))  # def + 58 lines + return = 60 lines
    assert long_functions(f"def f():\n{body}    return 0\n") == []
    assert long_functions(f"@decorator\ndef f():\n{body}    return 0\n") == ["f:2 (61 lines)"]
    nested = f"class C:\n    def m(self):\n        def inner():\n{body.replace('    ', '            ')}            return 1\n"
    assert long_functions(nested) == ["m:2 (61 lines)"]  # a method counts; inner (60 lines) does not yet
    assert long_functions(nested, 59) == ["m:2 (61 lines)", "inner:3 (60 lines)"]  # nested functions count
    assert long_functions(f"async def g():\n{body}    x = 1\n    return 0\n") == ["g:1 (61 lines)"]
    assert kind_branches(
        "if spec.output_type == 'multiple_choice': pass\n"
        "y = 1 if setting != 'oe' else 2\n"
        "z = [s for s in specs if 'ce' in s.setting]\n"
        "w = config.get('setting') not in ('ce',)\n"
        "v = doc['output_type'] == 'generate_until'\n"
        "match self.setting:\n    case 'ce': pass\n"
        "ok = setting_label(config) == label\n"  # a label, not the setting: not a branch on it
        "ok2 = SETTINGS[setting]\n"  # a lookup in the declaration: not a branch
    ) == ["1: spec.output_type == 'multiple_choice'", "2: setting != 'oe'", "3: 'ce' in s.setting",
          "4: config.get('setting') not in ('ce',)", "5: doc['output_type'] == 'generate_until'", "6: match self.setting"]


def test_no_function_of_eval_is_over_60_lines() -> None:
    found = {path: long for path, source in eval_modules().items() if (long := long_functions(source))}
    assert found == {}


def test_no_module_of_eval_is_over_400_lines() -> None:
    found = {path: n for path, source in eval_modules().items() if (n := len(source.splitlines())) > MAX_MODULE_LINES}
    assert found == {}


def test_only_the_task_kinds_branch_on_output_type_or_setting() -> None:
    modules = eval_modules()
    assert set(KIND_BRANCHES_ALLOWED) <= set(modules), "an allowed module is gone: update KIND_BRANCHES_ALLOWED"
    found = {path: b for path, source in modules.items() if path not in KIND_BRANCHES_ALLOWED and (b := kind_branches(source))}
    assert found == {}
    # The allowed place does branch (else its entry is stale and should go).
    assert kind_branches(modules["running/task_kinds.py"]) != []


# -- the engine contract (eval/api.py) and the one options type (eval/run_config.py) ----------------------------
REQUEST_KINDS = frozenset({"loglikelihood", "generate_until"})  # api.RequestKind's values (checked below)
# The one module that tells the backends apart by name: the registry.
BACKEND_REGISTRY = "backends/__init__.py"
# Classes named as options that are not a second options type of a run, and why.
OPTIONS_TYPES_ALLOWED = {
    "RunSpec": "the one type of a run's options",
    "BackendOptions": "what a backend is built from (api.py), made from a RunSpec by run_config.backend_options only",
    "LmEvalConfig": "lm-eval's own task config.yaml, read from an lm-eval folder (reporting/lm_eval_folder.py)",
}
_OPTIONS_NAME = ("Config", "Options", "Spec")


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _about_setting(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Whether a constant stands for the setting named loglikelihood: in a statement, comparison, ``or`` or
    dict entry about a ``setting`` (the name of a target, an operand, a key or a keyword)."""
    def names(n: ast.AST) -> list[str]:
        found = [x.id for x in ast.walk(n) if isinstance(x, ast.Name)] + [x.attr for x in ast.walk(n) if isinstance(x, ast.Attribute)]
        return found + [x.arg for x in ast.walk(n) if isinstance(x, ast.keyword) and x.arg]
    while node in parents:
        parent = parents[node]
        if isinstance(parent, ast.Dict):
            keys = [k.value for k, v in zip(parent.keys, parent.values) if v is node and isinstance(k, ast.Constant)]
            return any(k == "setting" for k in keys)
        if isinstance(parent, (ast.Assign, ast.AnnAssign)):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            return any("setting" in n.lower() for t in targets for n in names(t))
        if isinstance(parent, (ast.BoolOp, ast.Compare)):
            return any("setting" in n.lower() for n in names(parent))
        if isinstance(parent, ast.stmt):
            return False
        node = parent
    return False


def request_kind_literals(source: str) -> list[str]:
    """``line: 'literal'`` of every request kind written as a string (not the setting named loglikelihood)."""
    tree = ast.parse(source)
    parents = _parents(tree)
    return [f"{n.lineno}: {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and n.value in REQUEST_KINDS and not _about_setting(n, parents)]


def backend_name_comparisons(source: str, names: frozenset[str]) -> list[str]:
    """``line: code`` of every comparison of something with a backend's name (or an ``openai*`` one)."""
    def is_name(n: ast.expr) -> bool:
        if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
            return any(is_name(e) for e in n.elts)
        return isinstance(n, ast.Constant) and isinstance(n.value, str) and (n.value in names or n.value.startswith("openai"))
    return [f"{n.lineno}: {ast.unparse(n)}" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Compare) and any(is_name(side) for side in [n.left, *n.comparators])]


def options_types(source: str) -> list[str]:
    """Classes named ``*Config``, ``*Options`` or ``*Spec`` that are not a backend's ``Options`` (``Options = X``)."""
    tree = ast.parse(source)
    backend_options = {a.value.id for a in ast.walk(tree) if isinstance(a, ast.Assign) and isinstance(a.value, ast.Name)
                       and any(isinstance(t, ast.Name) and t.id == "Options" for t in a.targets)}
    return [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name.endswith(_OPTIONS_NAME)
            and n.name not in backend_options]


def test_the_contract_checks_see_what_they_must_refuse() -> None:
    assert request_kind_literals(
        "kind = 'generate_until'\n"
        "if kind == 'loglikelihood': pass\n"
        "f('loglikelihood')\n"
        "SETTINGS = ('loglikelihood', 'ce')\n"  # the setting: allowed
        "label = config.setting or 'loglikelihood'\n"
        "d = {'setting': 'loglikelihood'}\n"
        "class C:\n    setting: str = 'loglikelihood'\n"
    ) == ["1: 'generate_until'", "2: 'loglikelihood'", "3: 'loglikelihood'"]
    names = frozenset({"hf", "vllm"})
    assert backend_name_comparisons("a = b.name == 'vllm'\nc = x in ('hf', 'y')\nd = run.backend != 'openai'\ne = s == 'other'\n", names) == [
        "1: b.name == 'vllm'", "2: x in ('hf', 'y')", "3: run.backend != 'openai'"]
    assert options_types("class RunConfig: pass\nclass VOptions: pass\nclass B:\n    Options = VOptions\nclass Thing: pass\n") == ["RunConfig"]


def test_request_kinds_are_written_only_in_the_contract() -> None:
    from evalita_eval.api import RequestKind

    assert {k.value for k in RequestKind} == REQUEST_KINDS
    found = {path: hits for path, source in eval_modules().items() if path != "api.py" and (hits := request_kind_literals(source))}
    assert found == {}


def test_only_the_registry_compares_backend_names() -> None:
    from evalita_eval.backends import backend_names

    names = frozenset(backend_names())
    modules = eval_modules()
    found = {path: hits for path, source in modules.items()
             if path != BACKEND_REGISTRY and (hits := backend_name_comparisons(source, names))}
    assert found == {}


def test_run_spec_is_the_one_options_type() -> None:
    found = sorted(name for source in eval_modules().values() for name in options_types(source) if name not in OPTIONS_TYPES_ALLOWED)
    assert found == []
    every = {name for source in eval_modules().values() for name in options_types(source)}
    assert set(OPTIONS_TYPES_ALLOWED) <= every, "an allowed class is gone: update OPTIONS_TYPES_ALLOWED"


def contract_reads(source: str) -> list[str]:
    """``line: code`` of a ``getattr``/``hasattr`` of a declared Backend attribute (the contract declares it: read it),
    and of a backend method's signature inspected (streaming is declared: ``Backend.streams``)."""
    declared = {"tokenizer", "streams", "plans_calls", "requests_per_call", "mixes_prompts", "capabilities"}
    out = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr") and len(n.args) > 1:
            if isinstance(n.args[1], ast.Constant) and n.args[1].value in declared:
                out.append(f"{n.lineno}: {ast.unparse(n)}")
        if isinstance(n, ast.Attribute) and n.attr == "signature" and "on_result" in source:
            out.append(f"{n.lineno}: {ast.unparse(n)}")
    return out


def test_the_backend_contract_is_read_not_probed() -> None:
    assert contract_reads("t = getattr(b, 'tokenizer', None)\nx = b.tokenizer\ns = inspect.signature(f)  # on_result\n") == [
        "1: getattr(b, 'tokenizer', None)", "3: inspect.signature"]
    found = {path: hits for path, source in eval_modules().items() if (hits := contract_reads(source))}
    assert found == {}


# -- the run record: results.json is only ever the serialised RunRecord (record/read.py record_text) -----------------
_WRITES = frozenset({"write_text", "write_bytes", "dump", "RepoFile"})


def results_writes(source: str) -> list[str]:
    """``line: code`` of every write of a results.json (a path or file name that says ``results``, or a name bound to
    one in the same function) whose data is not ``record_text(...)`` (or a name bound to it, or its ``.encode()``)."""
    out = []
    tree = ast.parse(source)
    top = ast.Module([n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.ClassDef))], [])
    for scope in [top] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        bound = {t.id: ast.unparse(a.value) for a in ast.walk(scope) if isinstance(a, ast.Assign)
                 for t in a.targets if isinstance(t, ast.Name)}
        bound.update({w.optional_vars.id: ast.unparse(w.context_expr) for w in ast.walk(scope)
                      if isinstance(w, ast.withitem) and isinstance(w.optional_vars, ast.Name)})

        def says(node: ast.AST) -> str:
            text = ast.unparse(node)
            return text + "".join(bound.get(n.id, "") for n in ast.walk(node) if isinstance(n, ast.Name))

        for call in (n for n in ast.walk(scope) if isinstance(n, ast.Call)):
            name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
            if name not in _WRITES or not call.args:
                continue
            target = call.func.value if isinstance(call.func, ast.Attribute) and name != "dump" else call.args[-1]
            path = says(target) + (says(call.args[0]) if name == "RepoFile" else "")
            data = call.args[0] if name != "RepoFile" else call.args[-1]
            if ("results.json" in path or "RESULTS_FILE" in path) and "record_text(" not in says(data):
                out.append((call.lineno, f"{call.lineno}: {ast.unparse(call)}"))
    return [text for _line, text in sorted(set(out))]


def test_the_results_check_sees_what_it_must_refuse() -> None:
    assert results_writes(
        "def a(out, doc):\n    (out / 'results.json').write_text(json.dumps(doc))\n"
        "def b(folder, public):\n    return RepoFile(f'{folder}/results.json', json.dumps(public).encode())\n"
        "def c(out, doc):\n    tmp = out / '.results.json.tmp'\n    tmp.write_text(str(doc))\n"
        "def d(record):\n    text = record_text(record)\n    tmp = record.path.with_name('.results.json.tmp')\n"
        "    tmp.write_text(text)\n"
        "def e(folder, run):\n    return RepoFile(f'{folder}/results.json', record_text(run).encode('utf-8'))\n"
        "def f(out, doc):\n    with open(out / RESULTS_FILE, 'w') as fh:\n        json.dump(doc, fh)\n"
    ) == ["2: (out / 'results.json').write_text(json.dumps(doc))", "4: RepoFile(f'{folder}/results.json', json.dumps(public).encode())",
          "7: tmp.write_text(str(doc))", "16: json.dump(doc, fh)"]


def test_results_json_is_written_only_from_a_run_record() -> None:
    found = {path: hits for path, source in eval_modules().items() if (hits := results_writes(source))}
    assert found == {}

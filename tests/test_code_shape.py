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

"""Shape of the code: no module over 600 lines, no function over 100 lines (house style 13).

Parameterised by package root, so that another package joins the check by adding its name to
``PACKAGES``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("planner",)
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100


def too_long(source: str, name: str) -> list[str]:
    """What in one module breaks the limits, as 'name: N lines' entries."""
    problems = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        problems.append(f"{name}: module of {lines} lines (limit {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                problems.append(
                    f"{name}:{node.lineno} {node.name}() of {length} lines "
                    f"(limit {MAX_FUNCTION_LINES})"
                )
    return problems


@pytest.mark.parametrize("package", PACKAGES)
def test_modules_and_functions_stay_short(package: str) -> None:
    modules = sorted((ROOT / package).rglob("*.py"))
    assert modules, f"no Python modules under {package}/"
    problems = [p for m in modules for p in too_long(m.read_text(), str(m.relative_to(ROOT)))]
    assert not problems, "split these:\n" + "\n".join(problems)


def test_the_check_sees_a_long_function_and_a_long_module() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    assert too_long(f"def f():\n{body}\n", "m.py") == [
        f"m.py:1 f() of {MAX_FUNCTION_LINES + 1} lines (limit {MAX_FUNCTION_LINES})"
    ]
    assert too_long("x = 1\n" * (MAX_MODULE_LINES + 1), "m.py") == [
        f"m.py: module of {MAX_MODULE_LINES + 1} lines (limit {MAX_MODULE_LINES})"
    ]
    assert too_long("def f():\n    return 1\n", "m.py") == []

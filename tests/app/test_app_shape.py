"""The shape rules of issue 11 for ``app/``: no module over 600 lines, no function over 100.

(The planner half has its own check; this one reads app/ with ast so that it needs no import.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "app"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100
MODULES = sorted(APP.rglob("*.py"))


def test_the_app_package_is_found() -> None:
    assert len(MODULES) > 50  # a moved package must not make this test pass on nothing


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(APP)))
def test_module_and_function_sizes(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_MODULE_LINES, f"{path}: split it by concern"
    too_long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not too_long, f"{path}: {', '.join(too_long)}"

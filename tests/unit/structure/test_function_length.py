"""No function of the product is longer than a screen (80 lines, decorators excluded).

A long function is where a protocol hides its steps: the writer's commit was one of 124
lines before it became :mod:`streamer.write.transaction`. The bound holds for every
function and method in ``streamer/``, ``sources/`` and ``transforms/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.fixture_tables import REPO

MAX_LINES = 80
ROOTS = ("streamer", "sources", "transforms")


def long_functions(source: str, name: str) -> list[str]:
    """``name:line function (N lines)`` of each function in ``source`` over the bound."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > MAX_LINES:
                out.append(f"{name}:{node.lineno} {node.name} ({length} lines)")
    return out


def test_no_function_over_80_lines():
    found = []
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            found += long_functions(path.read_text(), str(path.relative_to(REPO)))
    assert not found, "functions over 80 lines:\n" + "\n".join(found)


def test_the_check_sees_a_long_method():
    body = "\n".join(f"        x{i} = {i}" for i in range(MAX_LINES))
    assert long_functions(f"class C:\n    def f(self):\n{body}\n", "m.py") == [f"m.py:2 f ({MAX_LINES + 1} lines)"]
    assert long_functions("def f():\n    return 1\n", "m.py") == []


def test_roots_exist():
    assert all((REPO / root).is_dir() for root in ROOTS), [str(Path(r)) for r in ROOTS]

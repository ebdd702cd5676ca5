"""No test asserts elapsed time: every such assertion anywhere in tests/ fails this test.

A threshold on wall-clock time is a coin toss on a loaded CI machine (a 2 s takeover, a
hang guard overrun by 0.05 s). A test waits for a *condition* instead, bounded in count
and time (``tests.support.timing.poll_until``), and the only marked place where elapsed
time is compared is ``tests.support.timing.hang_guard`` (``with hang_guard(120, "what"):``),
a generous limit that reports every thread's stack when it is passed.

What counts as an assertion on elapsed time (found in the AST, per function):

* an ``assert`` (or ``self.assertLess``-style call) with an ordering comparison
  (``<``, ``<=``, ``>``, ``>=``) one of whose operands involves
  - a clock read: ``time.monotonic()``, ``time.time()``, ``time.perf_counter()``
    (and their ``_ns`` forms), ``time.process_time()``;
  - a name assigned from a clock read (``t0 = time.monotonic()``, ``deadline = ...``) or
    from a difference involving one (``elapsed = time.monotonic() - t0``);
  - a name or attribute called like a duration: ``elapsed``, ``duration``, ``took``,
    ``wall_time``, ``runtime`` (alone or as a ``_``-separated part: ``elapsed_s``,
    ``report.duration_ms``).

Equality (``==``) is not an elapsed-time assertion (a timestamp written and read back).
The detector itself is checked on snippets below, both ways.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TESTS = REPO / "tests"
#: The marked hang guard: elapsed time may be compared inside these functions only.
ALLOWED = {("tests/support/timing.py", "hang_guard")}

CLOCKS = {"monotonic", "time", "perf_counter", "monotonic_ns", "time_ns", "perf_counter_ns", "process_time"}
DURATION_NAME = re.compile(r"(^|_)(elapsed|duration|took|wall_?time|runtime)(_|$)", re.IGNORECASE)
ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
UNITTEST_ORDERING = {"assertLess", "assertLessEqual", "assertGreater", "assertGreaterEqual"}


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr in CLOCKS and isinstance(f.value, ast.Name) and f.value.id == "time":
        return True
    return isinstance(f, ast.Name) and f.id in CLOCKS - {"time"}


def _identifier(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _timed(node: ast.AST, tainted: set[str]) -> bool:
    """Does this expression involve a clock read, a clock-derived name or a duration name?"""
    for sub in ast.walk(node):
        if _is_clock_call(sub):
            return True
        if isinstance(sub, ast.Name) and sub.id in tainted:
            return True
        ident = _identifier(sub)
        if ident is not None and DURATION_NAME.search(ident):
            return True
    return False


def _assigned_names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _taint(scope: ast.AST) -> set[str]:
    """Names assigned (anywhere in the scope) from a clock read or from a tainted name."""
    assigns: list[tuple[list[str], ast.AST]] = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign):
            assigns.append(([n for t in node.targets for n in _assigned_names(t)], node.value))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            assigns.append((_assigned_names(node.target), node.value))
        elif isinstance(node, ast.NamedExpr):
            assigns.append(([node.target.id], node.value))
    # each assignment once: timed by itself, or through the names it reads
    pending: list[tuple[list[str], set[str]]] = []
    tainted: set[str] = set()
    for names, value in assigns:
        if _timed(value, set()):
            tainted.update(names)
        else:
            pending.append((names, {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}))
    for _ in range(10):  # bounded fixpoint: chains of derived names are short
        grown = {n for names, reads in pending if reads & tainted for n in names} - tainted
        if not grown:
            break
        tainted |= grown
    return tainted


def _ordering_on_time(test: ast.AST, tainted: set[str]) -> bool:
    for node in ast.walk(test):
        if (isinstance(node, ast.Compare) and any(isinstance(op, ORDERING) for op in node.ops)
                and any(_timed(operand, tainted) for operand in [node.left, *node.comparators])):
            return True
    return False


def _scopes(tree: ast.Module) -> list[tuple[str, ast.AST, list[ast.AST]]]:
    """(function name, scope, statements directly in it, nested functions excluded)."""
    out = []
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        own: list[ast.AST] = []
        stack = list(ast.iter_child_nodes(scope))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            own.append(node)
            stack.extend(ast.iter_child_nodes(node))
        out.append((getattr(scope, "name", "<module>"), scope, own))
    return out


def wall_clock_assertions(source: str, rel: str = "<snippet>") -> list[str]:
    """``path:line: code`` of every assertion on elapsed time in ``source``."""
    tree = ast.parse(source)
    hits = []
    lines = source.splitlines()
    module_taint = _taint(tree)
    for name, scope, own in _scopes(tree):
        if (rel, name) in ALLOWED:
            continue
        tainted = module_taint if scope is tree else _taint(scope) | module_taint
        for node in own:
            if isinstance(node, ast.Assert):
                bad = _ordering_on_time(node.test, tainted)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in UNITTEST_ORDERING):
                bad = any(_timed(a, tainted) for a in node.args[:2])
            else:
                continue
            if bad:
                hits.append(f"{rel}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return sorted(set(hits))


def test_no_test_asserts_elapsed_time():
    hits: list[str] = []
    files = sorted(TESTS.rglob("*.py"))
    assert len(files) > 100, f"expected the whole test tree under {TESTS}, found {len(files)} files"
    for path in files:
        rel = path.relative_to(REPO).as_posix()
        hits += wall_clock_assertions(path.read_text(encoding="utf-8"), rel)
    assert not hits, (
        "assertions on elapsed time (flaky under load): wait for a condition with "
        "tests.support.timing.poll_until, or guard a hang with tests.support.timing.hang_guard:\n  "
        + "\n  ".join(hits))


# -- the detector, both ways ----------------------------------------------------------------
FLAGGED = [
    "import time\ndef t():\n    t0 = time.monotonic()\n    f()\n    assert time.monotonic() - t0 < 2\n",
    "import time\ndef t():\n    started = time.monotonic()\n    f()\n    assert 0.2 <= time.monotonic() - started < 10\n",
    "import time\ndef t():\n    t0 = time.perf_counter()\n    f()\n    elapsed = time.perf_counter() - t0\n    assert elapsed < 5, 'hung'\n",
    "def t(report):\n    assert report.duration_ms < 100\n",
    "def t():\n    took = run()\n    assert took <= 1.5\n",
    "from time import monotonic\ndef t():\n    end = monotonic() + 3\n    g()\n    assert monotonic() < end\n",
    "import time\nclass C:\n    def test(self):\n        t0 = time.time()\n        self.assertLess(time.time() - t0, 1)\n",
    "import time\ndef t():\n    t0 = time.monotonic()\n    dt = time.monotonic() - t0\n    span = dt * 1000\n    assert span > 500\n",
]
NOT_FLAGGED = [
    # a bounded poll of a condition: the clock only bounds the loop
    "import time\ndef t():\n    deadline = time.monotonic() + 30\n    while time.monotonic() < deadline and not done():\n"
    "        time.sleep(0.1)\n    assert done()\n",
    # a timestamp written and read back
    "import time\ndef t():\n    ts = int(time.time() * 1000)\n    assert read_ts() == ts\n",
    # a metric's value is data, not a measurement of this test
    "def t(v):\n    assert v('streamer_batch_duration_seconds_count') == 2\n",
    "def t(runs):\n    assert runs[0].seconds is not None and runs[0].seconds >= 0\n",
    # the marked hang guard
    "from tests.support.timing import hang_guard\ndef t():\n    with hang_guard(120, 'the acquire'):\n"
    "        acquire()\n",
]


@pytest.mark.parametrize("snippet", FLAGGED)
def test_the_detector_flags(snippet):
    assert wall_clock_assertions(snippet), snippet


@pytest.mark.parametrize("snippet", NOT_FLAGGED)
def test_the_detector_passes(snippet):
    assert not wall_clock_assertions(snippet), snippet


def test_the_hang_guard_is_the_only_exemption():
    source = (TESTS / "support" / "timing.py").read_text(encoding="utf-8")
    assert "def hang_guard(" in source
    assert {("tests/support/timing.py", "hang_guard")} == ALLOWED

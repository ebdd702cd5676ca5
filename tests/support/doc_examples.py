"""Run a document's marked examples the way a reader types them, and keep what each showed.

A fenced block right after ``<!-- example -->`` is run (``sh`` with bash, ``python`` with
this interpreter); ``<!-- example: file NAME -->`` saves the block as ``NAME`` first. The
blocks of one document run in order in one fresh folder.

One process, one Spark session: a line of an ``sh`` block that is a plain ``streamer ...``
(or ``.venv/bin/streamer ...``) command, with no shell syntax but a trailing comment, is run
through the ``streamer`` entry point itself (``streamer.cli:main``, what the installed
script calls) in this process, with the block's folder as the working directory; any other
lines (``mkdir``, here-documents, ``printf``) run with ``bash -euo pipefail`` in that folder,
in order. So the ``streamer`` commands share the test session's SparkSession instead of
starting a JVM each (the CLI makes every path absolute against the working directory before
Spark sees it), and each command's exit code, stdout and stderr are kept apart for the test
to check. A ``python`` block runs in an interpreter of its own started in the folder: a
SparkSession it starts resolves relative paths against its own working directory, as the
reader's would.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

_BLOCK = re.compile(r"<!-- example(?:: file (?P<file>\S+))? -->\n```(?P<lang>\w+)\n(?P<body>.*?)\n```", re.S)
_FENCED = re.compile(r"^```(?P<lang>\w*)\n(?P<body>.*?)\n```", re.S | re.M)
_STREAMER = re.compile(r"^(?:\.venv/bin/)?streamer(?:\s+(?P<args>[^#]*?))?\s*(?:#.*)?$")
_SHELL_SYNTAX = set("|;&<>$`()*?[]{}\\\"'")
_HEREDOC = re.compile(r"<<-?\s*'?\"?(?P<tag>\w+)'?\"?")


@dataclass(frozen=True)
class Example:
    lang: str
    body: str
    file: str | None  # save the body under this name instead of running it


@dataclass
class Ran:
    """One command (or a run of shell lines, or a python block) and what it showed."""

    block: int  # 1-based index of the example block in the document
    text: str  # as written
    argv: list[str] | None  # the ``streamer`` arguments, when it was a streamer command
    rc: int
    out: str
    err: str
    state: dict = field(default_factory=dict)  # what the observer recorded after it

    def describe(self) -> str:
        return (f"example {self.block}: {self.text!r} -> {self.rc}\n--- stdout\n{self.out[-4000:]}\n"
                f"--- stderr\n{self.err[-4000:]}")


def examples(doc: Path) -> list[Example]:
    return [Example(m["lang"], m["body"] + "\n", m["file"]) for m in _BLOCK.finditer(doc.read_text())]


def streamer_args(line: str) -> list[str] | None:
    """The arguments of a plain ``streamer`` command line, else ``None`` (a shell line)."""
    m = _STREAMER.match(line.strip())
    if not m:
        return None
    args = m["args"] or ""
    if _SHELL_SYNTAX & set(args):
        return None
    return shlex.split(args)


def _units(body: str) -> list[tuple[str, list[str] | None]]:
    """Split an ``sh`` block into streamer commands and runs of other shell lines."""
    units: list[tuple[str, list[str] | None]] = []
    shell: list[str] = []
    heredoc: str | None = None
    for line in body.splitlines():
        if heredoc is not None:
            shell.append(line)
            if line.strip() == heredoc:
                heredoc = None
            continue
        args = streamer_args(line)
        if args is not None:
            if shell:
                units.append(("\n".join(shell) + "\n", None))
                shell = []
            units.append((line.strip(), args))
            continue
        if line.strip():
            shell.append(line)
            m = _HEREDOC.search(line)
            if m:
                heredoc = m["tag"]
    if shell:
        units.append(("\n".join(shell) + "\n", None))
    return units


@contextlib.contextmanager
def _inside(cwd: Path):
    before = os.getcwd()
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)


def _in_process(fn: Callable[[], int | None]) -> tuple[int, str, str]:
    """Run ``fn`` with stdout and stderr captured; the logging set-up it makes (the CLI
    configures the root logger per command) is undone after, for the tests that follow."""
    import logging

    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = int(fn() or 0)
            except SystemExit as e:  # argparse
                rc = e.code if isinstance(e.code, int) else 1
    finally:
        for h in list(root.handlers):
            if h not in handlers:
                root.removeHandler(h)
        for h in handlers:
            if h not in root.handlers:
                root.addHandler(h)
        root.setLevel(level)
    return rc, out.getvalue(), err.getvalue()


def run_streamer(args: list[str], cwd: Path) -> tuple[int, str, str]:
    """``streamer ARGS`` in this process, in ``cwd``, as :func:`run_examples` runs one:
    (exit code, stdout, stderr)."""
    from streamer.cli import main

    with _inside(cwd):
        return _in_process(lambda: main(args))


def fenced_blocks(doc: Path) -> list[tuple[str, str]]:
    """Every fenced block of ``doc``, marked as an example or not: (language, body)."""
    return [(m["lang"], m["body"]) for m in _FENCED.finditer(doc.read_text())]


def run_examples(doc: Path, cwd: Path, observe: Callable[[Ran], dict] | None = None) -> list[Ran]:
    """Run ``doc``'s examples in ``cwd``, in order; fail at the first non-zero exit.

    ``observe`` is called after each command (in ``cwd``) and what it returns is kept as
    that command's ``state``: e.g. the table's timeline and rows after it."""
    import pytest

    from streamer.cli import main

    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    ran: list[Ran] = []

    def keep(i: int, text: str, args: list[str] | None, rc: int, out: str, err: str) -> None:
        r = Ran(i, text, args, rc, out, err)
        if rc != 0:
            pytest.fail(f"{doc.name} failed at " + r.describe())
        if observe is not None:  # right after the command, before the next one runs
            with _inside(cwd):
                r.state = observe(r)
        ran.append(r)

    for i, ex in enumerate(examples(doc), start=1):
        if ex.file:
            (cwd / ex.file).write_text(ex.body)
            continue
        if ex.lang == "python":
            # its own interpreter, started in the folder: a Spark session it starts reads
            # relative paths against its own working directory, as the reader's would
            done = subprocess.run([sys.executable, "-c", ex.body], cwd=cwd, env=env, capture_output=True,
                                  text=True, timeout=600)
            keep(i, ex.body, None, done.returncode, done.stdout, done.stderr)
        elif ex.lang == "sh":
            for text, args in _units(ex.body):
                if args is not None:
                    with _inside(cwd):
                        rc, out, err = _in_process(lambda args=args: main(args))
                else:
                    done = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=cwd, env=env,
                                          capture_output=True, text=True, timeout=600)
                    rc, out, err = done.returncode, done.stdout, done.stderr
                keep(i, text, args, rc, out, err)
        else:
            pytest.fail(f"{doc.name} example {i}: cannot run a {ex.lang!r} block")
    return ran

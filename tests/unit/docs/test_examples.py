"""The README's and the files tutorial's examples run as written.

A fenced block right after ``<!-- example -->`` is run (``sh`` with bash, ``python`` with
this interpreter); ``<!-- example: file NAME -->`` saves the block as ``NAME`` first. The
blocks of one document run in order in one fresh folder, as a reader would type them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
_BLOCK = re.compile(r"<!-- example(?:: file (?P<file>\S+))? -->\n```(?P<lang>\w+)\n(?P<body>.*?)\n```", re.S)


@dataclass(frozen=True)
class Example:
    lang: str
    body: str
    file: str | None  # save the body under this name instead of running it


def examples(doc: Path) -> list[Example]:
    return [Example(m["lang"], m["body"] + "\n", m["file"]) for m in _BLOCK.finditer(doc.read_text())]


def run_examples(doc: Path, cwd: Path) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for i, ex in enumerate(examples(doc)):
        if ex.file:
            (cwd / ex.file).write_text(ex.body)
            continue
        cmd = ["bash", "-euo", "pipefail", "-c", ex.body] if ex.lang == "sh" else [sys.executable, "-c", ex.body]
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, (
            f"{doc.name} example {i + 1} failed ({done.returncode}):\n{ex.body}\n"
            f"--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
        )


def test_the_documents_mark_their_examples():
    readme = examples(REPO / "README.md")
    assert [e.lang for e in readme] == ["sh", "python"]
    assert ".venv/bin/streamer demo" in readme[0].body and "lake/demo" in readme[0].body
    tutorial = examples(REPO / "docs" / "tutorial-files.md")
    assert [e.file for e in tutorial if e.file] == ["files.yaml"]
    assert len(tutorial) >= 8


@pytest.mark.integration
@pytest.mark.slow
def test_readme_examples_run(tmp_path):
    # The README's commands are written for the repository folder: the same names, fresh lake.
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    (tmp_path / "configs").symlink_to(REPO / "configs")
    run_examples(REPO / "README.md", tmp_path)
    assert (tmp_path / "lake" / "demo" / ".hoodie" / "hoodie.properties").is_file()
    assert (tmp_path / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.integration
@pytest.mark.slow
def test_files_tutorial_runs(tmp_path):
    run_examples(REPO / "docs" / "tutorial-files.md", tmp_path)
    for table in ("trips", "fares", "_errors/trips"):
        assert (tmp_path / "lake" / table / ".hoodie" / "hoodie.properties").is_file()
    assert (tmp_path / "trips.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

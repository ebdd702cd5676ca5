"""Every table command takes a path or a URI: ``/abs``, ``file:/abs``, ``file:///abs``, relative."""

from __future__ import annotations

import subprocess
import sys

import pytest

from streamer import __version__
from streamer.cli import main
from tests.conftest import REPO
from tests.support import block_tables as tg


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("paths") / "t")
    tg.build(path, 2)
    return path


@pytest.mark.parametrize("spelling", ["file:{p}", "file://{p}", "{p}"])
def test_show_read_timeline_check_accept_file_uris(table, spelling, capsys):
    uri = spelling.format(p=table)
    assert main(["show", uri, "--limit", "0"]) == 0
    assert "records (snapshot)" in capsys.readouterr().out
    assert main(["read", uri, "--format", "jsonl"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(tg.read_ours(table))
    assert main(["timeline", uri]) == 0
    assert "deltacommit" in capsys.readouterr().out
    assert main(["check", "--quick", uri]) == 0
    assert "intact" in capsys.readouterr().out


def test_relative_paths_resolve_from_the_cwd(table, monkeypatch, capsys):
    parent, name = table.rsplit("/", 1)
    monkeypatch.chdir(parent)
    assert main(["show", name, "--limit", "0"]) == 0
    assert "records (snapshot)" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_python_dash_m_streamer(args):
    done = subprocess.run([sys.executable, "-m", "streamer", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    if args == ["--version"]:
        assert done.stdout.strip() == f"mor-streamer {__version__}"
    else:
        assert done.stdout.startswith("usage: streamer")
        assert "validate" in done.stdout and "compact" in done.stdout

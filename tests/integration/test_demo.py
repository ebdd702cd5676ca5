from __future__ import annotations

import pytest

from streamer.cli import main

pytestmark = pytest.mark.integration


def test_demo_runs_end_to_end(spark, tmp_path, capsys):
    assert main(["demo", "--lake", str(tmp_path / "lake"), "--records", "300"]) == 0
    out = capsys.readouterr().out
    assert "wrote 300 records" in out
    assert (tmp_path / "lake").exists()

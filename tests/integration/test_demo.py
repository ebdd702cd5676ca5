from __future__ import annotations

import pytest

from streamer.cli import main
from streamer.read import Table

pytestmark = pytest.mark.integration


def test_demo_runs_the_demo_pipeline_and_explains_it(spark, tmp_path, capsys):
    lake = tmp_path / "lake"
    assert main(["demo", "--lake", f"file:{lake}", "--batches", "2"]) == 0  # a Hadoop URI names the folder
    out = capsys.readouterr().out
    # What a newcomer needs to see: the batches, the timeline, the snapshot.
    assert "batch 0: in 5000 -> written 5000" in out
    assert "batch 1: in 5000" in out
    assert "2. The table's timeline" in out and "deltacommit" in out
    assert "3. What a snapshot query returns now" in out and "sample:" in out
    table = Table.open(str(lake / "demo"))
    assert len(table.timeline.completed_writes()) == 2
    assert f"records (snapshot): {table.read().num_rows}" in out

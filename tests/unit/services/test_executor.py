"""Running pending plans beside Apache Hudi: a plan Hudi is running keeps Hudi's heartbeat,
not our plan lock."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from streamer.config.policies import CompactionPolicy
from streamer.read import Table
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.table.properties import METAFOLDER
from streamer.write.transaction import Transaction
from tests.support import block_tables as tg


@pytest.mark.parametrize("version", [6, 9])
def test_a_compaction_hudi_is_running_is_left_to_it(tmp_path, version):
    """Hudi's multi-writer compaction keeps ``.hoodie/.heartbeat/<instant>`` fresh while it
    runs (``BaseHoodieTableServiceClient.compact``, read in the 1.2 bundle's bytecode) and
    takes no lock of ours. Our executor ran such a plan a second time beside it, or, once
    Hudi had made it inflight, took it for a dead run and undid it, rolling back the files
    Hudi was about to commit. Now a fresh Hudi heartbeat leaves the plan to Hudi, requested
    or inflight; once it is past Hudi's expiry the run is a dead one, undone and run as
    before."""
    path = str(tmp_path / "t")
    with tg.at_version(version):
        _, _, model = tg.build(path, 3)
        comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
        assert comp is not None
        beat = Path(path, METAFOLDER, ".heartbeat", comp.timestamp)
        beat.parent.mkdir(exist_ok=True)
        beat.write_bytes(b"")  # Hudi's form, just refreshed
        assert execute(Table.open(path), comp).status == "busy"  # not run a second time
        t = Table.open(path)
        with Transaction(t.fs, path) as tx:  # Hudi's run goes inflight
            tx.start(t.timeline, t.timeline.get(comp.timestamp))
        assert execute(Table.open(path), comp).status == "busy"  # not undone as dead
        assert Table.open(path).timeline.get(comp.timestamp).is_inflight
        stopped = beat.stat().st_mtime - 121
        os.utime(beat, (stopped, stopped))
        assert execute(Table.open(path), comp).status == "completed"
        assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()

"""The cleaner keeps what a pending plan reads (Hudi's ``CleanPlanner`` rule)."""

from __future__ import annotations

from streamer.config.policies import CleanPolicy, CompactionPolicy, LogCompactionPolicy
from streamer.read import Table
from streamer.services.clean import run_clean
from streamer.services.common import read_plan
from streamer.services.compaction import schedule_compaction_safely
from streamer.services.executor import execute
from streamer.services.log_compaction import schedule_log_compaction
from tests.support import block_tables as tg


def test_the_logs_a_pending_log_compaction_reads_outlive_a_compaction_and_a_clean(tmp_path):
    """A compaction may run while a log compaction of the same slices is pending (RFC-48);
    the slices are then older than the retained commits, but the log compaction still
    reads them: Hudi's cleaner keeps them (``isFileSliceNeededForPendingLogCompaction``)
    and its executor fails without them. Ours deleted them, and the plan's units were
    skipped as gone."""
    path = str(tmp_path / "t")
    w, gen, model = tg.build(path, 4, deletes_every=0)
    lc = schedule_log_compaction(Table.open(path), LogCompactionPolicy(min_blocks=3))
    assert lc is not None
    comp = schedule_compaction_safely(Table.open(path), CompactionPolicy(), force=True)
    assert comp is not None and execute(Table.open(path), comp).status == "completed"
    for _ in range(2):
        tg.step(w, gen, model)
    t = Table.open(path)
    read = [(op.partition_path, name) for op in read_plan(t, lc).operations for name in op.delta_file_paths]
    assert read
    run_clean(Table.open(path), CleanPolicy(retain_commits=1))
    lost = [name for part, name in read if not (tmp_path / "t" / part / name).exists()]
    assert not lost, f"the clean deleted logs the pending log compaction {lc.timestamp} reads: {lost}"
    assert execute(Table.open(path), Table.open(path).timeline.get(lc.timestamp)).status == "completed"
    assert tg.canon(Table.open(path).read()) == tg.read_hudi_rs(path) == model.snapshot()

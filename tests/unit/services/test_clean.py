"""The cleaner keeps what a pending plan reads (Hudi's ``CleanPlanner`` rule)."""

from __future__ import annotations

from streamer.config.policies import CleanPolicy, CompactionPolicy, LogCompactionPolicy
from streamer.read import Table
from streamer.services.clean import earliest_commit_to_retain, run_clean
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


def test_the_retained_commits_stop_at_the_earliest_pending_instant(tmp_path):
    """A write still pending (an Apache Hudi writer's, which takes no lock of ours) was made
    against the slices of its time: the earliest retained commit is never after it, as in
    Hudi's ``CleanerUtils.getEarliestCommitToRetain``, but the newest completed write
    before it."""
    path = str(tmp_path / "t")
    tg.build(path, 4, deletes_every=0)
    writes = [i.timestamp for i in Table.open(path).timeline.completed_writes()]
    assert earliest_commit_to_retain(Table.open(path), 1).timestamp == writes[-1]
    # a write requested between the second and third, still in flight
    between = str(int(writes[1]) + 1)
    assert writes[1] < between < writes[2]
    folder = tmp_path / "t" / ".hoodie"
    for state in ("requested", "inflight"):
        (folder / f"{between}.deltacommit.{state}").write_bytes(b"")
    assert earliest_commit_to_retain(Table.open(path), 1).timestamp == writes[1]
    assert earliest_commit_to_retain(Table.open(path), 4).timestamp == writes[1]
    # before the first write: nothing may be cleaned
    for state in ("requested", "inflight"):
        (folder / f"{between}.deltacommit.{state}").rename(folder / f"{str(int(writes[0]) - 1)}.deltacommit.{state}")
    assert earliest_commit_to_retain(Table.open(path), 1) is None

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


def test_the_slice_before_the_earliest_retained_commit_stays_as_in_hudi(tmp_path):
    """Retaining commits keeps every slice from the earliest retained commit on and the
    last slice before it, which a query planned before that commit may still be reading
    (Hudi's ``CleanPlanner`` keeps ``lastVersionBeforeEarliestCommitToRetain`` for that).
    When a compaction was that commit, ours deleted the slice it compacted, which Hudi
    1.2's cleaner keeps (a differential run of both cleaners on copies of a table Hudi
    wrote now leaves the same data files)."""
    import pyarrow as pa

    from streamer.write import HudiWriter, TableConfig, WriteOptions

    path = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64())])
    w = HudiWriter.create(path, TableConfig("t", ("id",), (), "ts"), schema=schema,
                          options=WriteOptions(engine="local"))
    w.upsert(pa.table({"id": [1, 2], "ts": [1, 1]}, schema=schema))
    w.upsert(pa.table({"id": [1], "ts": [2]}, schema=schema))  # a log of the first slice
    comp = schedule_compaction_safely(Table.open(path), CompactionPolicy(), force=True)
    assert comp is not None and execute(Table.open(path), comp).status == "completed"
    w.upsert(pa.table({"id": [2], "ts": [3]}, schema=schema))
    assert earliest_commit_to_retain(Table.open(path), 2).timestamp == comp.timestamp
    before = sorted(p.name for p in (tmp_path / "t").iterdir() if not p.name.startswith("."))
    assert run_clean(Table.open(path), CleanPolicy(retain_commits=2)).files_deleted == 0
    assert sorted(p.name for p in (tmp_path / "t").iterdir() if not p.name.startswith(".")) == before
    # retaining one commit, the compacted slice goes: no query can be planned before both
    assert run_clean(Table.open(path), CleanPolicy(retain_commits=1)).files_deleted == 2
    assert sorted((r["id"], r["ts"]) for r in Table.open(path).read().to_pylist()) == [(1, 2), (2, 3)]

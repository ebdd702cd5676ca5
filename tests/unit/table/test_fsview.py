"""File system view on fixtures (cross-checked with hudi-rs) and on hand-built layouts."""

from __future__ import annotations

import hudi  # hudi-rs, a pinned test dependency: missing means `make setup` was not run
import pytest

from streamer.fs import FileSystem
from streamer.table.fsview import FileSystemView
from streamer.table.instant import Action
from streamer.table.metadata import CompactionOperation, CompactionPlan
from streamer.table.properties import load_properties, new_table_properties, write_properties
from streamer.table.timeline import Timeline
from tests.support.fixture_tables import FIXTURE_NAMES, fixture_table_path


def _view(path: str) -> FileSystemView:
    fs = FileSystem()
    props = load_properties(fs, path)
    return FileSystemView(fs, path, props, Timeline.load(fs, path, props))


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_latest_slices_match_hudi_rs(hudi_fixtures_dir, name):
    path = str(fixture_table_path(hudi_fixtures_dir, name))
    mine = sorted(
        (s.partition_path, s.file_id, s.base_file.name if s.base_file else "", tuple(f.name for f in s.log_files))
        for s in _view(path).latest_merged_slices()
    )
    theirs = sorted(
        (s.partition_path, s.file_id, s.base_file_name, tuple(s.log_file_names))
        for s in hudi.HudiTable(path).get_file_slices()
    )
    assert mine == theirs


def test_replaced_groups_excluded(hudi_fixtures_dir):
    v = _view(str(fixture_table_path(hudi_fixtures_dir, "sample_table__mor__parquet__v6_simplekeygen_nonhivestyle_overwritetable")))
    assert len(v.replaced_file_groups()) == 3
    assert [s.partition_path for s in v.latest_merged_slices()] == ["30"]
    assert len(v.latest_merged_slices(as_of="20250121000656060")) == 3  # before the overwrite


def _touch(p, data=b"x"):
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


def test_pending_compaction_merged_slice_and_uncommitted_files(tmp_path):
    fs = FileSystem()
    base = str(tmp_path)
    write_properties(fs, base, new_table_properties("t", partition_fields=["p"]))
    tl = Timeline.load(fs, base, load_properties(fs, base))
    c1 = tl.create_requested(Action.DELTA_COMMIT, "20250101000000001")
    tl.complete(tl.transition_to_inflight(c1), b"{}")
    c2 = tl.create_requested(Action.DELTA_COMMIT, "20250101000000002")
    tl.complete(tl.transition_to_inflight(c2), b"{}")
    part = tmp_path / "p=1"
    _touch(part / ".hoodie_partition_metadata")
    _touch(part / "fg-0_0-1-0_20250101000000001.parquet")
    _touch(part / ".fg-0_20250101000000001.log.1_0-1-0")
    plan = CompactionPlan([CompactionOperation("fg-0", "p=1", "20250101000000001")])
    tl.create_requested(Action.COMPACTION, "20250101000000003", plan.to_avro_bytes())
    c4 = tl.create_requested(Action.DELTA_COMMIT, "20250101000000004")
    tl.complete(tl.transition_to_inflight(c4), b"{}")
    _touch(part / ".fg-0_20250101000000003.log.1_0-2-0")  # written into the pending compaction's slice
    _touch(part / "fg-0_0-3-0_20250101000000003.parquet")  # compactor output, not committed yet
    _touch(part / "fg-1_0-5-0_20250101000000005.parquet")  # an inflight write's file
    view = FileSystemView(fs, base, load_properties(fs, base), tl.reload())
    (merged,) = view.latest_merged_slices()
    assert merged.base_file.name == "fg-0_0-1-0_20250101000000001.parquet"
    assert [f.base_instant for f in merged.log_files] == ["20250101000000001", "20250101000000003"]
    (latest,) = view.latest_file_slices()
    assert latest.base_instant == "20250101000000003" and latest.base_file is None
    (ro,) = view.latest_base_files()
    assert ro.base_file.instant_time == "20250101000000001" and not ro.log_files
    assert view.pending_compaction_file_groups() == {("p=1", "fg-0"): "20250101000000003"}
    assert view.partitions() == ["p=1"]


@pytest.mark.parametrize("version", [6, 9])
def test_files_of_commits_archived_under_live_slices_stay_committed(tmp_path, version):
    """Hudi's archiver moves commits whose files live slices still read (ours keeps them:
    streamer/services/archive.py), and Hudi's readers take an instant older than the active
    timeline as committed. So do we: a base file, a version-6 log named by its slice's base
    instant, and (layout 2) a log placed by its delta commit's completion time from the LSM
    history - none drops out of a read or of the writer's view (an update would become a
    second row of its key)."""
    import pyarrow as pa

    from streamer.config.policies import CompactionPolicy
    from streamer.read import Table
    from streamer.services.compaction import schedule_compaction
    from streamer.services.executor import execute
    from streamer.table import lsm_history
    from streamer.table.instant import State
    from streamer.write import HudiWriter
    from tests.support import block_tables as tg

    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model = tg.build(path, 3, deletes_every=0)
        comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
        assert execute(Table.open(path), comp).status == "completed"
        for _ in range(2):
            tg.step(w, gen, model)
    t = Table.open(path)
    live = [s for s in t.fsview.latest_merged_slices() if s.base_file is not None and s.log_files]
    assert live, "a slice with a base file and logs"
    last = t.timeline.completed_writes()[-1].timestamp  # Hudi keeps the newest commits active
    gone = [i for i in t.timeline.instants if i.timestamp < last]
    assert any(s.base_instant in {i.timestamp for i in gone} for s in live)
    assert any(lf.base_instant in {i.timestamp for i in gone} for s in live for lf in s.log_files)
    if version >= 8:  # the history Hudi would have written, with the completion times
        folder = lsm_history.history_dir(path, t.properties)
        name, data = lsm_history.data_file([lsm_history.ArchivedInstant(
            i.timestamp, i.completion_time, i.completed_action, None, None) for i in gone])
        t.fs.write_atomic(f"{folder}/{name}", data)
        t.fs.write_atomic(f"{folder}/manifest_1", lsm_history.manifest_bytes([lsm_history.HistoryFile(name, len(data))]))
        t.fs.write_atomic(f"{folder}/_version_", b"1")
    for i in gone:  # archived: every file of the instant leaves the active timeline
        for state in (State.REQUESTED, State.INFLIGHT, State.COMPLETED):
            t.fs.delete_file(t.timeline.path_of(i, state))
    assert tg.read_ours(path) == model.snapshot()
    w2 = HudiWriter.open(path, options=tg.SMALL)
    again = model.snapshot()[:10]
    batch = pa.Table.from_pylist([{**r, "ts": 10**6, "value": "again"} for r in again], schema=tg.SCHEMA)
    w2.upsert(batch)
    model.apply(batch)
    rows = tg.read_ours(path)
    assert rows == model.snapshot()
    assert len({(r["city"], r["id"]) for r in rows}) == len(rows)

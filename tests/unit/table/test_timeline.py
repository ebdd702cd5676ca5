"""Timeline: both layouts read, layout 1 written with Hudi's state protocol."""

from __future__ import annotations

import pytest

from streamer.errors import CommitError
from streamer.fs import FileSystem
from streamer.table.instant import Action, Instant, State, new_instant_time, parse_timeline_file
from streamer.table.metadata import CommitMetadata, CompactionOperation, CompactionPlan, WriteStat
from streamer.table.properties import load_properties, new_table_properties, write_properties
from streamer.table.timeline import Timeline, hudi_run
from tests.support.fixture_tables import fixture_table_path


def _load(fixtures_dir, name):
    fs = FileSystem()
    path = str(fixture_table_path(fixtures_dir, name))
    return Timeline.load(fs, path, load_properties(fs, path))


def test_parse_file_names():
    assert parse_timeline_file("20240418173213674.inflight").action == Action.COMMIT
    f = parse_timeline_file("20251220210129235_20251220210129883.commit")
    assert (f.timestamp, f.completion_time, f.state) == ("20251220210129235", "20251220210129883", State.COMPLETED)
    assert parse_timeline_file("20251220210129235.compaction.requested").state is State.REQUESTED
    assert parse_timeline_file("hoodie.properties") is None


def test_layout1_fixture(hudi_fixtures_dir):
    tl = _load(hudi_fixtures_dir, "sample_table__mor__parquet__v6_nonpartitioned_rollback")
    assert [(i.action, i.state) for i in tl] == [
        ("deltacommit", State.COMPLETED), ("rollback", State.COMPLETED), ("deltacommit", State.COMPLETED)]
    assert len(tl.completed_writes()) == 2


def test_layout2_fixture_with_compaction_and_completion_times(hudi_fixtures_dir):
    tl = _load(hudi_fixtures_dir, "quickstart_trips_table__mor__avro__v8_trips_8i3u1d")
    comp = tl.get("20251220210129235")
    assert comp.action == Action.COMMIT and comp.pending_action == Action.COMPACTION and comp.is_compaction
    assert comp.completion_time == "20251220210129883"
    plan = CompactionPlan.from_bytes(tl.read_plan(comp))
    assert len(plan.operations) == 3 and plan.operations[0].delta_file_paths
    assert tl.as_of("20251220210125441").last_completed_write().timestamp == "20251220210125441"
    # completed_by: the compaction requested at ...9235 only completed at ...9883.
    assert tl.completed_by("20251220210129500").get("20251220210129235").is_pending


def test_write_protocol_layout1(tmp_path):
    fs = FileSystem()
    write_properties(fs, str(tmp_path), new_table_properties("t", record_key_fields=["id"]))
    tl = Timeline.load(fs, str(tmp_path), load_properties(fs, str(tmp_path)))
    req = tl.create_requested(Action.DELTA_COMMIT)
    assert (tmp_path / ".hoodie" / f"{req.timestamp}.deltacommit.requested").exists()
    inflight = tl.transition_to_inflight(req)
    with pytest.raises(CommitError):
        tl.complete(req, b"{}")
    cm = CommitMetadata(operation_type="UPSERT", extra_metadata={"schema": "{}", "deltastreamer.checkpoint.key": "k"})
    cm.add(WriteStat(file_id="f-0", path="p/.f-0_1.log.1_0-1-0", partition_path="p", num_writes=2, log_version=1))
    done = tl.complete(inflight, cm.to_json_bytes())
    assert done.is_completed and done.action == Action.DELTA_COMMIT
    again = tl.reload()
    assert again.is_completed(req.timestamp)
    parsed = CommitMetadata.from_bytes(again.read_details(again.get(req.timestamp)))
    assert parsed.checkpoint() == "k" and next(parsed.write_stats()).num_writes == 2
    # No temp files left behind by the atomic publish.
    assert not [p for p in (tmp_path / ".hoodie").iterdir() if p.name.endswith(".tmp")]


def test_compaction_completes_as_commit_and_times_increase(tmp_path):
    fs = FileSystem()
    write_properties(fs, str(tmp_path), new_table_properties("t"))
    tl = Timeline.load(fs, str(tmp_path), load_properties(fs, str(tmp_path)))
    plan = CompactionPlan([CompactionOperation("f-0", "p", "1", "f-0_0-1-0_1.parquet", [".f-0_1.log.1_0-1-0"])])
    req = tl.create_requested(Action.COMPACTION, content=plan.to_avro_bytes())
    assert tl.pending_compactions() == [req]
    assert CompactionPlan.from_bytes(tl.read_plan(req)).operations[0].file_id == "f-0"
    done = tl.complete(tl.transition_to_inflight(req), b"{}")
    assert done.action == Action.COMMIT and (tmp_path / ".hoodie" / f"{req.timestamp}.commit").exists()
    assert tl.reload().get(req.timestamp).pending_action == Action.COMPACTION
    assert tl.new_instant_time() > req.timestamp
    a, b = new_instant_time(), new_instant_time()
    assert b > a


def test_failed_writes_and_delete_pending(tmp_path):
    fs = FileSystem()
    write_properties(fs, str(tmp_path), new_table_properties("t"))
    tl = Timeline.load(fs, str(tmp_path), load_properties(fs, str(tmp_path)))
    inflight = tl.transition_to_inflight(tl.create_requested(Action.DELTA_COMMIT))
    assert tl.failed_writes() == [inflight]
    tl.delete_pending(inflight)
    assert len(tl.reload()) == 0


def test_layout2_writes_completion_times_later_than_every_time_before(tmp_path):
    """Layout 2 (table version 8/9): files in .hoodie/timeline, completed ones named
    <requested>_<completion>, completion times unique and increasing, commit metadata Avro."""
    fs = FileSystem()
    write_properties(fs, str(tmp_path), new_table_properties("t", version=9))
    props = load_properties(fs, str(tmp_path))
    tl = Timeline.load(fs, str(tmp_path), props)
    assert tl.layout_version == 2 and tl.folder.endswith(".hoodie/timeline")
    done = []
    for _ in range(3):
        req = tl.create_requested(Action.DELTA_COMMIT)
        meta = CommitMetadata(operation_type="UPSERT", extra_metadata={"deltastreamer.checkpoint.key": "t,0:5"})
        done.append(tl.complete(tl.transition_to_inflight(req), tl.commit_bytes(meta)))
    names = sorted(p.name for p in (tmp_path / ".hoodie" / "timeline").iterdir())
    assert f"{done[0].timestamp}_{done[0].completion_time}.deltacommit" in names
    times = [t for d in done for t in (d.timestamp, d.completion_time)]
    assert times == sorted(times) and len(set(times)) == len(times)
    again = tl.reload()
    assert [i.completion_time for i in again.completed()] == [d.completion_time for d in done]
    raw = again.read_details(again.completed()[0])
    assert raw.startswith(b"Obj\x01"), "layout 2 commit metadata must be Avro"
    extra = CommitMetadata.from_bytes(raw).extra_metadata
    assert extra == {"streamer.checkpoint.key.v2": "t,0:5"}  # HoodieStreamer 1.x's key


def test_revert_to_requested_keeps_the_plan(tmp_path):
    fs = FileSystem()
    write_properties(fs, str(tmp_path), new_table_properties("t"))
    tl = Timeline.load(fs, str(tmp_path), load_properties(fs, str(tmp_path)))
    plan = CompactionPlan([CompactionOperation("f-0", "p", "1", "f-0_0-1-0_1.parquet", [".f-0_1.log.1_0-1-0"])])
    req = tl.create_requested(Action.COMPACTION, content=plan.to_avro_bytes())
    inflight = tl.transition_to_inflight(req)
    back = tl.revert_to_requested(inflight)
    assert back.is_requested and back.action == Action.COMPACTION
    assert tl.get(req.timestamp) == back and tl.pending_compactions() == [back]
    assert not (tmp_path / ".hoodie" / f"{req.timestamp}.compaction.inflight").exists()
    again = tl.reload()
    assert again.get(req.timestamp).is_requested
    assert CompactionPlan.from_bytes(again.read_plan(again.get(req.timestamp))).operations[0].file_id == "f-0"
    assert tl.revert_to_requested(back) == back  # idempotent
    done = tl.complete(tl.transition_to_inflight(back), b"{}")  # and it can run again
    with pytest.raises(CommitError):
        tl.revert_to_requested(done)


@pytest.mark.parametrize(("action", "words"), [
    (Action.DELTA_COMMIT, "an Apache Hudi writer is writing instant 20260101000000000 (its heartbeat"),
    (Action.REPLACE_COMMIT, "an Apache Hudi writer is writing or clustering instant 20260101000000000 (replacecommit)"),
    (Action.COMPACTION, "Apache Hudi is running compaction 20260101000000000 (its heartbeat"),
])
def test_a_live_hudi_run_is_named_by_what_its_action_may_be(action, words):
    """A pending replacecommit of table version 6 is a write or a clustering: the words say both."""
    assert words in hudi_run(Instant("20260101000000000", action, State.INFLIGHT), 12.0)

"""Slice merging on hand-made Arrow tables and blocks: ordering, deletes, rollback, log compaction."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from streamer.table.log_format import BlockType
from streamer.table.merge import (
    MergeSpec,
    ScanStats,
    effective_blocks,
    merge_records,
)

EVENT = MergeSpec(ordering_field="ts", event_time_ordering=True)
COMMIT = MergeSpec(ordering_field="ts", event_time_ordering=False)


def rows(keys, ts, vals, extra=None):
    d = {"_hoodie_record_key": keys, "ts": pa.array(ts, pa.int64()), "v": vals}
    d.update(extra or {})
    return pa.table(d)


def result(t):
    return sorted((r["_hoodie_record_key"], r["v"]) for r in t.to_pylist())


def test_event_time_keeps_highest_ordering_value_even_if_written_earlier():
    base = rows(["a", "b"], [10, 10], ["a0", "b0"])
    log1 = rows(["a", "b"], [5, 11], ["a1", "b1"])
    assert result(merge_records(base, [("data", log1)], EVENT)) == [("a", "a0"), ("b", "b1")]


def test_commit_time_keeps_last_written():
    base = rows(["a", "b"], [10, 10], ["a0", "b0"])
    log1 = rows(["a"], [5], ["a1"])
    assert result(merge_records(base, [("data", log1)], COMMIT)) == [("a", "a1"), ("b", "b0")]


def test_ties_go_to_the_later_write_and_duplicates_in_one_block():
    log1 = rows(["a", "a"], [7, 7], ["first", "second"])
    assert result(merge_records(None, [("data", log1)], EVENT)) == [("a", "second")]


def test_delete_block_and_resurrection():
    base = rows(["a", "b", "c"], [1, 1, 1], ["a0", "b0", "c0"])
    dels = pa.table({"_hoodie_record_key": ["a", "b"], "ordering_value": pa.array([0, 0], pa.int32())})
    later = rows(["b"], [2], ["b2"])
    out = merge_records(base, [("delete", dels), ("data", later)], EVENT)
    assert result(out) == [("b", "b2"), ("c", "c0")]


def test_delete_with_lower_ordering_value_loses_under_event_time():
    base = rows(["a"], [10], ["a0"])
    dels = pa.table({"_hoodie_record_key": ["a"], "ordering_value": pa.array([3], pa.int64())})
    assert result(merge_records(base, [("delete", dels)], EVENT)) == [("a", "a0")]
    assert result(merge_records(base, [("delete", dels)], COMMIT)) == []


def test_delete_with_null_ordering_values_is_natural_order():
    """Hudi allows deletes without an ordering value: they win by write order."""
    base = rows(["a", "b"], [10, 10], ["a0", "b0"])
    dels = pa.table({"_hoodie_record_key": ["a"], "ordering_value": pa.nulls(1)})
    assert result(merge_records(base, [("delete", dels)], EVENT)) == [("b", "b0")]


def test_is_deleted_flag_drops_the_winner():
    base = rows(["a", "b"], [1, 1], ["a0", "b0"], {"_hoodie_is_deleted": [False, False]})
    log1 = rows(["a"], [2], ["a1"], {"_hoodie_is_deleted": [True]})
    assert result(merge_records(base, [("data", log1)], EVENT)) == [("b", "b0")]


def test_no_meta_fields_uses_record_key_fields():
    spec = MergeSpec(record_key_fields=("id", "name"), ordering_field="ts", populate_meta_fields=False)
    base = pa.table({"id": [1, 1], "name": ["x", "y"], "ts": [1, 1], "v": ["p", "q"]})
    log1 = pa.table({"id": [1], "name": ["y"], "ts": [2], "v": ["q2"]})
    out = merge_records(base, [("data", log1)], spec)
    assert sorted(out.column("v").to_pylist()) == ["p", "q2"]


def test_schema_evolution_adds_null_column_to_older_rows():
    base = rows(["a"], [1], ["a0"])
    log1 = rows(["b"], [1], ["b1"], {"new": ["n"]})
    out = merge_records(base, [("data", log1)], EVENT).sort_by("_hoodie_record_key")
    assert out.column("new").to_pylist() == [None, "n"]


# ------------------------------------------------------------------ block selection
@dataclass
class FakeBlock:
    block_type: int
    instant_time: str | None = None
    target_instant_time: str | None = None
    compacted_block_times: list[str] = field(default_factory=list)
    corrupt_reason: str | None = None
    header: dict = field(default_factory=dict)
    tag: str = ""


def data(ts, tag="", compacted=()):
    return ("log", FakeBlock(BlockType.AVRO_DATA, ts, compacted_block_times=list(compacted), tag=tag))


def tags(blocks):
    return [b.tag for b in blocks]


def test_uncommitted_blocks_skipped_and_counted():
    st = ScanStats()
    out = effective_blocks([data("1", "a"), data("2", "b")], {"1"}, st)
    assert tags(out) == ["a"] and st.uncommitted_blocks == 1


def test_rollback_cancels_target_blocks_anywhere():
    rb = ("log", FakeBlock(BlockType.COMMAND, "9", target_instant_time="2", header={3: "0"}))
    st = ScanStats()
    out = effective_blocks([data("1", "a"), data("2", "b"), rb, data("2", "late")], {"1", "2", "9"}, st)
    assert tags(out) == ["a"] and st.rolled_back_blocks == 2


def test_compacted_block_replaces_named_blocks_only_when_completed():
    blocks = [data("1", "a"), data("2", "b"), data("3", "c"), data("4", "C12", compacted=("1", "2"))]
    st = ScanStats()
    assert tags(effective_blocks(blocks, {"1", "2", "3", "4"}, st)) == ["C12", "c"]
    assert st.compacted_away_blocks == 2
    assert tags(effective_blocks(blocks, {"1", "2", "3"}, ScanStats())) == ["a", "b", "c"]


def test_corrupt_and_delete_blocks():
    bad = ("x.log", FakeBlock(BlockType.CORRUPT, corrupt_reason="torn"))
    dele = ("log", FakeBlock(BlockType.DELETE, "1", tag="d"))
    st = ScanStats()
    assert tags(effective_blocks([bad, dele], {"1"}, st)) == ["d"]
    assert st.corrupt_block_count == 1 and st.corrupt_blocks[0].path == "x.log"


def dele(ts, tag="", compacted=()):
    return ("log", FakeBlock(BlockType.DELETE, ts, compacted_block_times=list(compacted), tag=tag))


def test_all_blocks_of_a_compacted_run_stay_where_the_run_was():
    """A log compaction may write a run as several blocks (split data, a delete block):
    all of them replace the run in place, none drifts behind blocks written later."""
    done = {"1", "2", "3", "4"}
    split = [data("1", "a"), data("2", "b"), data("3", "c"),
             data("4", "C1", compacted=("1", "2")), data("4", "C2", compacted=("1", "2"))]
    assert tags(effective_blocks(split, done, ScanStats())) == ["C1", "C2", "c"]
    with_delete = [data("1", "a"), dele("2", "d"), data("3", "c"),
                   data("4", "C", compacted=("1", "2")), dele("4", "CD", compacted=("1", "2"))]
    assert tags(effective_blocks(with_delete, done, ScanStats())) == ["C", "CD", "c"]
    # a compaction instant with two runs keeps each run's blocks at that run's place
    two_runs = [data("1", "a"), data("2", "b"), data("5", "big"), data("6", "e"), data("7", "f"),
                data("8", "R1", compacted=("1", "2")), dele("8", "R1d", compacted=("1", "2")),
                data("8", "R2", compacted=("6", "7")), dele("8", "R2d", compacted=("6", "7"))]
    assert tags(effective_blocks(two_runs, done | {"5", "6", "7", "8"}, ScanStats())) == [
        "R1", "R1d", "big", "R2", "R2d"]


def test_compacted_delete_does_not_beat_a_later_reinsert_under_commit_time():
    """Run: insert a, delete a; then a is inserted again. The stitched run is one data
    block (b) and one delete block (a); the later insert of a must still win."""
    base = rows(["x"], [1], ["x0"])
    tables = {
        "b1": rows(["a", "b"], [1, 1], ["a1", "b1"]),
        "d2": pa.table({"_hoodie_record_key": ["a"], "ordering_value": pa.array([0], pa.int64())}),
        "c3": rows(["a"], [1], ["a3"]),
        "S": rows(["b"], [1], ["b1"]),
        "SD": pa.table({"_hoodie_record_key": ["a"], "ordering_value": pa.array([0], pa.int64())}),
    }
    blocks = [data("1", "b1"), dele("2", "d2"), data("3", "c3"),
              data("4", "S", compacted=("1", "2")), dele("4", "SD", compacted=("1", "2"))]

    def read(completed, spec):
        eff = effective_blocks(blocks, completed, ScanStats())
        kinds = [("delete" if b.block_type == BlockType.DELETE else "data", tables[b.tag]) for b in eff]
        return result(merge_records(base, kinds, spec))

    want = [("a", "a3"), ("b", "b1"), ("x", "x0")]
    for spec in (COMMIT, EVENT):  # equal ordering values: write order decides
        assert read({"1", "2", "3"}, spec) == want  # before the log compaction completes
        assert read({"1", "2", "3", "4"}, spec) == want  # and after

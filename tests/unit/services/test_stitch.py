"""Stitching a run keeps each key's final state: the winning row or the winning delete."""

from __future__ import annotations

import pyarrow as pa

from streamer.services.stitch import stitch
from streamer.table.merge import MergeSpec, merge_records

SPEC = MergeSpec(("id",), "ts", True, True)


def rows(*recs):
    return pa.table({"_hoodie_record_key": [str(k) for k, _, _ in recs], "_hoodie_partition_path": ["p"] * len(recs),
                     "ts": pa.array([t for _, t, _ in recs], pa.int64()), "v": [v for _, _, v in recs]})


def dels(*recs):
    return pa.table({"_hoodie_record_key": [str(k) for k, _ in recs], "_hoodie_partition_path": ["p"] * len(recs),
                     "ordering_value": pa.array([t for _, t in recs], pa.int64())})


def test_latest_wins_and_deletes_survive():
    run = [("data", rows((1, 1, "a"), (2, 2, "b"))), ("delete", dels((2, 3))), ("data", rows((1, 4, "c")))]
    out = stitch(run, SPEC)
    assert out.data.column("v").to_pylist() == ["c"]
    assert out.deletes.column("_hoodie_record_key").to_pylist() == ["2"]
    assert out.input_rows == 3 and out.input_deletes == 1


def test_reinsert_after_delete_keeps_row_only():
    run = [("delete", dels((5, 1))), ("data", rows((5, 2, "back")))]
    out = stitch(run, SPEC)
    assert out.deletes is None
    assert out.data.column("v").to_pylist() == ["back"]


def test_stitched_run_reads_like_the_originals():
    base = rows((1, 0, "base1"), (2, 0, "base2"), (3, 0, "base3"))
    run = [("data", rows((1, 1, "x"))), ("delete", dels((2, 2))), ("data", rows((4, 3, "new"))),
           ("delete", dels((4, 4))), ("data", rows((1, 5, "y")))]
    later = [("data", rows((3, 6, "z")))]
    out = stitch(run, SPEC)
    stitched = [("data", out.data)] + ([("delete", out.deletes)] if out.deletes is not None else [])
    before = merge_records(base, run + later, SPEC)
    after = merge_records(base, stitched + later, SPEC)
    key = lambda t: sorted(t.select(["_hoodie_record_key", "v"]).to_pylist(), key=str)  # noqa: E731
    assert key(before) == key(after)
    assert {r["_hoodie_record_key"] for r in key(after)} == {"1", "3"}


def test_commit_time_ordering_uses_position():
    spec = MergeSpec(("id",), None, False, True)
    run = [("data", rows((1, 9, "old"))), ("data", rows((1, 1, "new")))]
    assert stitch(run, spec).data.column("v").to_pylist() == ["new"]

"""Tagging on the rows + planning from counts decides what the driver-side plan decides.

The Spark engine tags rows where they are and plans from counts
(:mod:`streamer.write.tagging`); the local engine plans from the keys
(:func:`~streamer.write.plan.build_plan`). Per row, both must pick the same file group
(existing ones by id; new ones by their place among the partition's new groups) and the
same operation - which is what makes the two engines write the same table.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from streamer.index.bucket import bucket_file_id
from streamer.table.fsview import BaseFile, FileSlice
from streamer.write.config import IndexConfig
from streamer.write.filegroup import OP_COL
from streamer.write.keygen import PARTITION_PATH_COL, RECORD_KEY_COL
from streamer.write.plan import OP_DROP, TASK_COL, SizingPolicy, build_bucket_plan, build_plan
from streamer.write.prepare import IS_DELETE_COL
from streamer.write.tagging import (
    ROW_COL,
    PlanRequest,
    bucket_plan_from_counts,
    count_buckets,
    count_tags,
    plan_from_counts,
    tag_buckets,
    tag_rows,
)

PARTS = ["a", "b", "c"]
SIZING = SizingPolicy(small_file_limit=5_000, max_file_size=8_000, avg_record_size=100)


def _slices() -> list[FileSlice]:
    out = []
    for i, (part, size) in enumerate([("a", 1_000), ("a", 7_000), ("b", 9_000)]):
        base = BaseFile(f"{part}/f{i}_1-0-0_001.parquet", f"f{i}", "001", "1-0-0", size)
        out.append(FileSlice(partition_path=part, file_id=f"f{i}", base_instant="001", base_file=base))
    return out


def _batch(seed: int, n: int) -> tuple[pa.Table, pa.Array]:
    rng = np.random.default_rng(seed)
    keys = rng.choice(10 * n, size=n, replace=False)
    parts = rng.choice(PARTS, size=n)
    found = {"a": [None, "f0", "f1"], "b": [None, "f2"], "c": [None]}
    fids = [found[p][rng.integers(len(found[p]))] for p in parts]
    table = pa.table({
        RECORD_KEY_COL: pa.array([f"k{k:06d}" for k in keys]),
        PARTITION_PATH_COL: pa.array(parts.tolist()),
        IS_DELETE_COL: pa.array(rng.random(n) < 0.2),
    })
    return table, pa.array(fids, pa.string())


def _request(slices, op="upsert", index=None) -> PlanRequest:
    return PlanRequest(op=op, index=index or IndexConfig(), fs=None, base_path="t", slices=slices,
                       log_versions={}, append_to={}, is_committed=lambda i: True, on_corrupt=None,
                       instant="005", sizing=SIZING)


def _targets(tasks, tids, ops) -> list[tuple]:
    """Per row: (op, partition, existing file id | new group's rank in its partition)."""
    new_rank: dict[int, int] = {}
    for tid in sorted(t for t in tasks if tasks[t].is_new):
        new_rank[tid] = sum(1 for r in new_rank if tasks[r].partition == tasks[tid].partition)
    return [(op, None, None) if op == OP_DROP else
            (op, tasks[t].partition, new_rank[t] if tasks[t].is_new else tasks[t].file_id)
            for t, op in zip(tids, ops, strict=True)]


def _distributed(keys: pa.Table, file_ids, req, pieces: int = 3):
    """Tag per partition (as executors do), count, plan, then assign in arbitrary pieces."""
    keys = keys.append_column(ROW_COL, pa.array(np.arange(keys.num_rows, dtype=np.int64)))
    tagged = []
    for part in PARTS:
        rows = np.flatnonzero(np.array(keys.column(PARTITION_PATH_COL).to_pylist()) == part)
        if len(rows):
            fids = file_ids.take(pa.array(rows)) if file_ids is not None else None
            tagged.append(tag_rows(keys.take(pa.array(rows)), fids))
    tagged = pa.concat_tables(tagged)
    plan = plan_from_counts(count_tags(tagged), req)
    step = max(1, tagged.num_rows // pieces)
    assigned = pa.concat_tables(plan.assign(tagged.slice(i, step)) for i in range(0, tagged.num_rows, step))
    return plan, assigned


@pytest.mark.parametrize("op", ["upsert", "insert", "bulk_insert"])
def test_counts_plan_routes_every_row_as_the_driver_plan_does(op):
    slices = _slices()
    keys, file_ids = _batch(7, 400)
    if op != "upsert":
        file_ids = None
    sizing = SizingPolicy(SIZING.small_file_limit, SIZING.max_file_size, SIZING.avg_record_size,
                          use_small_files=(op != "bulk_insert"))
    req = PlanRequest(**{**_request(slices, op).__dict__, "sizing": sizing})
    driver = build_plan(keys, file_ids, slices, {}, "005", sizing)
    plan, assigned = _distributed(keys, file_ids, req)

    expected = _targets(driver.tasks, driver.assignment.column(TASK_COL).to_pylist(),
                        driver.assignment.column(OP_COL).to_pylist())
    got: list[tuple] = [(OP_DROP, None, None)] * keys.num_rows
    for row, t in zip(assigned.column(ROW_COL).to_pylist(),
                      _targets(plan.tasks, assigned.column(TASK_COL).to_pylist(),
                               assigned.column(OP_COL).to_pylist()), strict=True):
        got[row] = t
    assert got == expected
    assert sorted(plan.new_partitions) == sorted(driver.new_partitions)
    assert len(plan.tasks) == len(driver.tasks)


def test_bucket_counts_plan_routes_every_row_as_the_driver_plan_does():
    index = IndexConfig(type="bucket", num_buckets=4)
    slices = [FileSlice(partition_path="a", file_id=bucket_file_id(1), base_instant="001"),
              FileSlice(partition_path="b", file_id=bucket_file_id(3), base_instant="001")]
    keys, _ = _batch(11, 300)
    req = _request(slices, index=index)
    from streamer.index.bucket import bucket_ids

    driver = build_bucket_plan(keys, bucket_ids(keys.column(RECORD_KEY_COL), 4, index.hash_fields), 4,
                               slices, {}, "005", "t")
    keyed = keys.append_column(ROW_COL, pa.array(np.arange(keys.num_rows, dtype=np.int64)))
    tagged = pa.concat_tables([tag_buckets(keyed.slice(0, 100), index), tag_buckets(keyed.slice(100), index)])
    plan = bucket_plan_from_counts(count_buckets(tagged), req)
    assigned = plan.assign(tagged)

    def by_group(tasks, tid):
        t = tasks[tid]
        return (t.partition, t.file_id[:8], t.is_new)

    expected = {r: (op, by_group(driver.tasks, t)) for r, (t, op) in enumerate(zip(
        driver.assignment.column(TASK_COL).to_pylist(), driver.assignment.column(OP_COL).to_pylist(),
        strict=True)) if op != OP_DROP}
    got = {r: (op, by_group(plan.tasks, t)) for r, t, op in zip(
        assigned.column(ROW_COL).to_pylist(), assigned.column(TASK_COL).to_pylist(),
        assigned.column(OP_COL).to_pylist(), strict=True)}
    assert got == expected
    assert sorted(plan.new_partitions) == sorted(driver.new_partitions)
    assert len(plan.tasks) == len(driver.tasks)


def test_inserts_of_a_partition_are_cut_into_contiguous_key_runs():
    keys = pa.table({RECORD_KEY_COL: pa.array([f"k{i:03d}" for i in range(200)][::-1]),
                     PARTITION_PATH_COL: pa.array(["c"] * 200), IS_DELETE_COL: pa.array([False] * 200)})
    req = _request([], op="insert")
    plan, assigned = _distributed(keys, None, req, pieces=7)
    assert len(plan.tasks) == 3  # 200 rows of 100 bytes into 8000-byte groups
    by_task: dict[int, list[str]] = {}
    key_of = keys.column(RECORD_KEY_COL).to_pylist()
    for row, tid in zip(assigned.column(ROW_COL).to_pylist(), assigned.column(TASK_COL).to_pylist(),
                        strict=True):
        by_task.setdefault(tid, []).append(key_of[row])
    ranges = sorted((min(v), max(v)) for v in by_task.values())
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False))

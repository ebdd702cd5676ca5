"""A table partition planned alone routes its rows as the whole batch planned at once.

The Spark engine runs the local engine's planning on executors, once per table
partition, with the request cut to that partition's slices
(:func:`~streamer.write.tagging.partition_request`); the local engine plans the whole
batch on the driver. Per row both must pick the same file group (existing ones by id;
new ones by their place among the partition's new groups) and the same operation -
which is what makes the two engines write the same table.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from streamer.index.bucket import bucket_file_id, bucket_ids
from streamer.table.fsview import BaseFile, FileSlice
from streamer.table.identity import IndexConfig
from streamer.write.engine.spark import pack, unpack
from streamer.write.filegroup import OP_COL
from streamer.write.keygen import PARTITION_PATH_COL, RECORD_KEY_COL
from streamer.write.plan import (
    OP_DROP,
    TASK_COL,
    PlanTarget,
    SizingPolicy,
    build_bucket_plan,
    build_plan,
)
from streamer.write.prepare import IS_DELETE_COL
from streamer.write.tagging import BUCKET_COL, PlanRequest, partition_request

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


def _request(slices, op="upsert", index=None, sizing=SIZING) -> PlanRequest:
    return PlanRequest(op=op, index=index or IndexConfig(), fs=None, base_path="t", slices=slices,
                       log_versions={}, append_to={}, is_committed=lambda i: True, on_corrupt=None,
                       instant="005", sizing=sizing, parallelism=4)


def _targets(plan) -> list[tuple]:
    """Per row: (op, partition, existing file id | new group's rank in its partition)."""
    tasks = plan.tasks
    new_rank: dict[int, int] = {}
    for tid in sorted(t for t in tasks if tasks[t].is_new):
        new_rank[tid] = sum(1 for r in new_rank if tasks[r].partition == tasks[tid].partition)
    tids = plan.assignment.column(TASK_COL).to_pylist()
    ops = plan.assignment.column(OP_COL).to_pylist()
    return [(op, None, None) if op == OP_DROP else
            (op, tasks[t].partition, new_rank[t] if tasks[t].is_new else tasks[t].file_id)
            for t, op in zip(tids, ops, strict=True)]


def _rows_of(keys: pa.Table, part: str) -> np.ndarray:
    return np.flatnonzero(np.array(keys.column(PARTITION_PATH_COL).to_pylist()) == part)


@pytest.mark.parametrize("op", ["upsert", "insert", "bulk_insert"])
def test_a_partition_planned_alone_routes_every_row_as_the_whole_batch_does(op):
    slices = _slices()
    keys, file_ids = _batch(7, 400)
    if op != "upsert":
        file_ids = None
    sizing = SizingPolicy(SIZING.small_file_limit, SIZING.max_file_size, SIZING.avg_record_size,
                          use_small_files=(op != "bulk_insert"))
    req = _request(slices, op, sizing=sizing)
    whole = build_plan(keys, file_ids, PlanTarget(slices, {}, "005"), sizing)
    expected = _targets(whole)

    got: list[tuple] = [(OP_DROP, None, None)] * keys.num_rows
    new_partitions, n_tasks = [], 0
    for part in PARTS:
        rows = _rows_of(keys, part)
        preq = partition_request(req, part, parallelism=1)
        assert {s.partition_path for s in preq.slices} <= {part} and preq.parallelism == 1
        fids = file_ids.take(pa.array(rows)) if file_ids is not None else None
        plan = build_plan(keys.take(pa.array(rows)), fids, PlanTarget(preq.slices, {}, "005"), sizing)
        for row, target in zip(rows, _targets(plan), strict=True):
            got[row] = target
        new_partitions += plan.new_partitions
        n_tasks += len(plan.tasks)
    assert got == expected
    assert sorted(new_partitions) == sorted(whole.new_partitions)
    assert n_tasks == len(whole.tasks)


def test_a_partition_planned_alone_routes_buckets_as_the_whole_batch_does():
    index = IndexConfig(type="bucket", num_buckets=4)
    slices = [FileSlice(partition_path="a", file_id=bucket_file_id(1), base_instant="001"),
              FileSlice(partition_path="b", file_id=bucket_file_id(3), base_instant="001")]
    keys, _ = _batch(11, 300)
    req = _request(slices, index=index)

    def plan_of(k: pa.Table, sl):
        return build_bucket_plan(k, bucket_ids(k.column(RECORD_KEY_COL), 4, index.hash_fields), 4,
                                 PlanTarget(sl, {}, "005"), "t")

    def groups(plan) -> list[tuple]:
        tasks = plan.tasks
        return [(op, None) if op == OP_DROP else (op, tasks[t].partition, tasks[t].file_id[:8], tasks[t].is_new)
                for t, op in zip(plan.assignment.column(TASK_COL).to_pylist(),
                                 plan.assignment.column(OP_COL).to_pylist(), strict=True)]

    whole = plan_of(keys, slices)
    got: list[tuple] = [None] * keys.num_rows  # type: ignore[list-item]
    new_partitions = []
    for part in PARTS:
        rows = _rows_of(keys, part)
        plan = plan_of(keys.take(pa.array(rows)), partition_request(req, part).slices)
        for row, g in zip(rows, groups(plan), strict=True):
            got[row] = g
        new_partitions += plan.new_partitions
    assert got == groups(whole)
    assert sorted(new_partitions) == sorted(whole.new_partitions)


def test_rows_are_packed_by_partition_in_arrival_order():
    """The Spark engine's shuffle routes packed pieces: each holds one partition's rows
    (bucket index: one bucket's), and unpacked they are that partition's rows as they came."""
    keys, _ = _batch(3, 200)
    packed = pack(keys, bucketed=False)
    assert sorted(packed.column(PARTITION_PATH_COL).to_pylist()) == PARTS
    got = unpack(iter(packed.to_batches()))
    assert sorted(got) == PARTS
    for part, tables in got.items():
        assert len(tables) == 1
        assert tables[0].equals(keys.take(pa.array(_rows_of(keys, part))))
    one = keys.filter(pa.compute.equal(keys.column(PARTITION_PATH_COL), "a"))
    assert pack(one, bucketed=False).num_rows == 1
    # two pieces of one partition (two packers, or one packer flushing twice) stay in order
    twice = unpack(iter([*pack(one.slice(0, 5), False).to_batches(), *pack(one.slice(5), False).to_batches()]))
    assert pa.concat_tables(twice["a"]).equals(one)


def test_bucketed_rows_are_packed_per_partition_and_bucket():
    keys, _ = _batch(4, 300)
    buckets = pa.array(bucket_ids(keys.column(RECORD_KEY_COL), 4, ()), pa.int32())
    tagged = keys.append_column(BUCKET_COL, buckets)
    packed = pack(tagged, bucketed=True)
    pairs = list(zip(packed.column(PARTITION_PATH_COL).to_pylist(), packed.column(BUCKET_COL).to_pylist(),
                     strict=True))
    expected = sorted(set(zip(keys.column(PARTITION_PATH_COL).to_pylist(), buckets.to_pylist(), strict=True)))
    assert sorted(pairs) == expected
    for (part, bucket), b in zip(pairs, packed.column("_mor_rows"), strict=True):
        rows = pa.ipc.open_stream(b.as_buffer()).read_all()
        assert BUCKET_COL not in rows.column_names
        want = [i for i, (p, k) in enumerate(zip(keys.column(PARTITION_PATH_COL).to_pylist(), buckets.to_pylist(),
                                                  strict=True)) if (p, k) == (part, bucket)]
        assert rows.equals(keys.take(pa.array(want)))

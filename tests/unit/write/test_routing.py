"""Acceptance 3 and the bin-packing rules behind it."""

from __future__ import annotations

import math

import pyarrow as pa

from streamer.data import short_keys
from streamer.read.table import Table
from streamer.write import HudiWriter, TableConfig, WriteOptions
from streamer.write.routing import FileGroupSize, InsertBucket, assign_rows, plan_inserts
from tests.support.write_model import canon, read_hudi_rs, read_ours


def test_small_groups_fill_first_then_new_groups_even():
    groups = [
        FileGroupSize("p", "big", "1", 95),
        FileGroupSize("p", "small", "1", 10),
        FileGroupSize("p", "mid", "1", 40),
        FileGroupSize("q", "other", "1", 0),
    ]
    b = plan_inserts("p", 30, groups, avg_record_size=1, small_file_limit=50, max_file_size=100)
    # smallest first: 'small' has room for 90, takes all 30; 'mid' and 'big' untouched
    assert b == [InsertBucket("p", 30, "small", "1")]
    b = plan_inserts("p", 400, groups, 1, 50, 100)
    assert [x.file_id for x in b[:2]] == ["small", "mid"] and [x.count for x in b[:2]] == [90, 60]
    new = b[2:]
    assert all(x.file_id is None for x in new) and sum(x.count for x in new) == 250
    assert len(new) == math.ceil(250 / 100) and max(x.count for x in new) - min(x.count for x in new) <= 1


def test_assign_rows_cuts_sorted_key_runs():
    keys = pa.array(["d", "a", "c", "b", "e"])
    buckets = [InsertBucket("p", 2), InsertBucket("p", 3)]
    assert assign_rows(keys, buckets).to_pylist() == [1, 0, 1, 0, 1]
    # the same keys as short-key integers (the planner's path for keys of up to 8 bytes)
    assert assign_rows(short_keys(keys), buckets).to_pylist() == [1, 0, 1, 0, 1]
    ids = pa.array(["10", "9", "100", "1", "99", "10"])  # string order, not numeric; a repeat
    runs = [InsertBucket("p", 3), InsertBucket("p", 3)]
    assert assign_rows(short_keys(ids), runs).to_pylist() == assign_rows(ids, runs).to_pylist() == [0, 1, 1, 0, 1, 0]


def test_stream_of_small_inserts_packs_into_few_file_groups(tmp_path):
    path = str(tmp_path / "t")
    opts = WriteOptions(small_file_limit=45_000, max_file_size=60_000, default_record_size=200,
                        slice_bloom_num_entries=500, engine="local")
    w = HudiWriter.create(path, TableConfig("route", ("id",), ("city",), "ts"), options=opts)
    expected = []
    for b in range(20):
        ids = list(range(b * 25, b * 25 + 25))
        batch = pa.table({"id": ids, "city": ["sf"] * 25, "ts": [b] * 25,
                          "value": [f"{'x' * 40}{i}" for i in ids], "amount": [float(i) for i in ids]})
        w.insert(batch)
        expected.extend(batch.to_pylist())
    t = Table.open(path)
    slices = t.fsview.latest_file_slices()
    total = sum((s.base_file.size if s.base_file else 0) + sum(lf.size for lf in s.log_files) for s in slices)
    groups = len(slices)
    # near total/target, and far from one new file group per batch
    assert groups <= math.ceil(total / opts.max_file_size) + 2, (groups, total)
    assert groups < 20 / 3
    assert any(s.log_files for s in slices), "inserts must have been appended to small groups' logs"
    want = canon(pa.Table.from_pylist(expected))
    assert canon(read_ours(path)) == want
    assert canon(read_hudi_rs(path)) == want

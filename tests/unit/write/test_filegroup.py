"""What the file-group writer puts in a block's Parquet beside the rows."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamer.data import short_keys
from streamer.fs import FileSystem
from streamer.index.footer_cache import CACHE
from streamer.index.slice_members import block_cache_key
from streamer.table.identity import IndexConfig, IndexType, KeyGenType
from streamer.table.log_format import BlockType, read_log_file
from streamer.write import HudiWriter, TableConfig, WriteOptions
from streamer.write.keygen import partition_value_column
from tests.support.write_model import read_hudi_rs


def _rows(ids, ts):
    return pa.table({"id": [str(i) for i in ids], "city": ["sf" if i % 2 else "oslo" for i in ids],
                     "ts": [ts] * len(ids), "fare": [float(i) for i in ids]})


def _has_statistics(md: pq.FileMetaData) -> list[bool]:
    rg = md.row_group(0)
    return [rg.column(i).is_stats_set for i in range(md.num_columns)]


def test_log_blocks_carry_no_column_statistics_and_base_files_do(tmp_path):
    """No reader skips a log block's rows on statistics (its rows merge over the base's),
    so blocks are written without them; base files keep them for query engines' pruning.
    hudi-rs reads the rows written, update by update."""
    base = str(tmp_path / "t")
    w = HudiWriter.create(base, TableConfig("t", ("id",), ("city",), "ts"),
                          options=WriteOptions(engine="local"))
    w.upsert(_rows(range(20), 1))
    w.upsert(_rows(range(10, 30), 2))  # updates and inserts: log blocks in both groups
    fs = FileSystem()
    files = [str(p) for p in tmp_path.rglob("*") if p.is_file() and ".hoodie" not in p.parts]
    bases = [p for p in files if p.endswith(".parquet")]
    logs = [p for p in files if ".log." in p]
    assert bases and logs
    for path in bases:
        with fs.open_input_file(path) as f:
            assert all(_has_statistics(pq.read_metadata(f))), path
    blocks = [b for p in logs for b in read_log_file(fs, p, lazy=False) if b.block_type == BlockType.PARQUET_DATA]
    assert blocks
    for b in blocks:
        assert not any(_has_statistics(pq.read_metadata(io.BytesIO(b.content())))), b
    got = sorted((r["id"], r["ts"]) for r in read_hudi_rs(base).to_pylist())
    assert got == sorted([(str(i), 1) for i in range(10)] + [(str(i), 2) for i in range(10, 30)])


@pytest.mark.parametrize("block_format", ["parquet", "avro"])
def test_the_partition_column_is_written_as_its_partition_value(tmp_path, block_format):
    """A simple key generator's string partition field holds its partition path on every
    row, so a file group writes it as its partition's one value instead of gathering it;
    the default partition (null and empty both land there) keeps the rows' own values."""
    base = str(tmp_path / "t")
    w = HudiWriter.create(base, TableConfig("t", ("id",), ("city",), "ts", log_block_format=block_format),
                          options=WriteOptions(engine="local"))
    cities = ["sf", "oslo", None, "", "a/b", "é"]
    first = pa.table({"id": [str(i) for i in range(12)], "city": [cities[i % 6] for i in range(12)],
                      "ts": [1] * 12})
    second = pa.table({"id": [str(i) for i in range(6, 18)], "city": [cities[i % 6] for i in range(6, 18)],
                       "ts": [2] * 12})
    w.upsert(first)
    w.upsert(second)
    got = sorted((r["id"], r["city"], r["ts"]) for r in read_hudi_rs(base).to_pylist())
    want = {r["id"]: (r["id"], r["city"], r["ts"]) for r in first.to_pylist() + second.to_pylist()}
    assert got == sorted(want.values())


def test_a_global_index_keeps_each_rows_own_partition_value(tmp_path):
    """Without ``update_partition_path`` an update is written where its key is stored, so
    its partition field may name another partition than the one holding it: written as
    the row has it, never as the partition's value."""
    base = str(tmp_path / "t")
    cfg = TableConfig("t", ("id",), ("city",), "ts",
                      index=IndexConfig(IndexType.GLOBAL_BLOOM, update_partition_path=False))
    w = HudiWriter.create(base, cfg, options=WriteOptions(engine="local"))
    w.upsert(pa.table({"id": ["1", "2"], "city": ["sf", "oslo"], "ts": [1, 1]}))
    w.upsert(pa.table({"id": ["1"], "city": ["oslo"], "ts": [2]}))  # stays in sf
    rows = {r["id"]: r for r in read_hudi_rs(base).to_pylist()}
    assert rows["1"]["city"] == "oslo" and rows["1"]["_hoodie_partition_path"] == "sf"
    assert rows["2"]["city"] == "oslo"


@pytest.mark.parametrize(("cfg", "column"), [
    (TableConfig("t", ("id",), ("city",)), "city"),
    (TableConfig("t", ("id",), ("city",), keygen=KeyGenType.COMPLEX), "city"),
    (TableConfig("t", ("id",), ("city",), hive_style_partitioning=True), None),  # city=sf
    (TableConfig("t", ("id",), ("n",)), None),  # an integer's path is its text
    (TableConfig("t", ("id",), ("city", "n"), keygen=KeyGenType.COMPLEX), None),
    (TableConfig("t", ("id",)), None),
    (TableConfig("t", ("id",), ("city",), index=IndexConfig(IndexType.GLOBAL_BLOOM)), None),
])
def test_which_column_holds_its_partition_value(cfg, column):
    schema = pa.schema([("id", pa.string()), ("city", pa.string()), ("n", pa.int64())])
    assert partition_value_column(cfg, schema) == column


def test_the_process_keeps_each_written_blocks_keys_and_short_keys(tmp_path):
    """The next lookup matches a block this process wrote without reading its keys back
    or making their short-key integers again: both are kept as written, and equal what
    reading the block gives."""
    base = str(tmp_path / "t")
    w = HudiWriter.create(base, TableConfig("t", ("id",), ("city",), "ts"), options=WriteOptions(engine="local"))
    w.upsert(_rows(range(50), 1))
    w.upsert(_rows([*range(0, 50, 7), *range(100, 140)], 2))  # updates and inserts
    fs = FileSystem()
    seen = 0
    for p in (str(p) for p in tmp_path.rglob("*.log.*")):
        size = fs.status(p).size
        for b in read_log_file(fs, p, lazy=False):
            if b.block_type != BlockType.PARQUET_DATA:
                continue
            key = block_cache_key(p, b.offset, b.instant_time, size)
            keys, (short,) = CACHE.peek("keys", *key), CACHE.peek("short_keys", *key)
            assert keys.equals(b.record_keys())
            assert np.array_equal(short, short_keys(b.record_keys()))
            seen += 1
    assert seen

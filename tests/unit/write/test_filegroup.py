"""What the file-group writer puts in a block's Parquet beside the rows."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from streamer.fs import FileSystem
from streamer.read import Table
from streamer.table.log_format import BlockType, read_log_file
from streamer.write import HudiWriter, TableConfig, WriteOptions


def _rows(ids, ts):
    return pa.table({"id": [str(i) for i in ids], "city": ["sf" if i % 2 else "oslo" for i in ids],
                     "ts": [ts] * len(ids), "fare": [float(i) for i in ids]})


def _has_statistics(md: pq.FileMetaData) -> list[bool]:
    rg = md.row_group(0)
    return [rg.column(i).is_stats_set for i in range(md.num_columns)]


def test_log_blocks_carry_no_column_statistics_and_base_files_do(tmp_path):
    """No reader skips a log block's rows on statistics (its rows merge over the base's),
    so blocks are written without them; base files keep them for query engines' pruning.
    The rows read back the same either way."""
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
    got = sorted((r["id"], r["ts"]) for r in Table.open(base).read().to_pylist())
    assert got == sorted([(str(i), 1) for i in range(10)] + [(str(i), 2) for i in range(10, 30)])

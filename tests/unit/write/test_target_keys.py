"""The four ``target:`` keys issue 11 found accepted and ignored, each fed and its effect checked.

* ``compression`` reaches the base files and the Parquet log blocks (column chunk codecs);
* ``log_block_max_size`` splits one commit's data for a file group into several blocks of
  one log file, and the table reads the same (ours and hudi-rs) and keeps its index;
* ``log_file_max_size`` is refused with the reason (a log file never outgrows one commit);
* ``url_encode_partitions`` escapes partition values as Hudi does; the escaping it
  uses (and the reader's decoding) is Hudi's ``PartitionPathEncodeUtils``.

Tables are written the way a pipeline writes them: ``TargetConfig`` through the one
mapping (:mod:`streamer.pipeline.sink`).
"""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from streamer.config import parse_pipelines
from streamer.config.pipeline import EngineConfig
from streamer.config.target import TargetConfig
from streamer.fs import resolve
from streamer.pipeline.sink import TableSink
from streamer.read.table import Table
from streamer.table.log_format import BlockType, read_log_file
from streamer.table.naming import (
    escape_path_name,
    escape_path_names,
    partition_path,
    partition_values,
    unescape_path_name,
)
from streamer.table.properties import properties_path
from streamer.write import HudiWriter
from streamer.write.filegroup import block_row_ranges
from tests.support.write_model import read_hudi_rs, read_ours

COLUMNS = ["id", "city", "ts", "note"]


def _fs():
    return resolve("/")[0]


def _target(tmp_path, **keys) -> TargetConfig:
    return TargetConfig(
        path=str(tmp_path / "t"), record_key="id", partition_by="city", ordering_field="ts",
        table_name="t", **keys,
    )


def _writer(target: TargetConfig, batch: pa.Table) -> HudiWriter:
    return TableSink(target, EngineConfig(mode="local")).writer(batch.schema)


def _batch(ids: range, ts: int, city: str = "sf") -> pa.Table:
    return pa.table(
        {
            "id": pa.array(list(ids), pa.int64()),
            "city": [city] * len(ids),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "note": [f"note {i} at {ts} " + "x" * 80 for i in ids],
        }
    )


def _rows(table: pa.Table) -> list[dict]:
    return sorted(table.select(COLUMNS).to_pylist(), key=lambda r: (r["city"], r["id"]))


def _slices(path: str):
    return Table.open(path).fsview.latest_file_slices()


def _codecs(parquet: pq.ParquetFile) -> set[str]:
    md = parquet.metadata
    return {
        md.row_group(g).column(c).compression
        for g in range(md.num_row_groups)
        for c in range(md.num_columns)
    }


# ----------------------------------------------------------------------------- compression
@pytest.mark.conformance
@pytest.mark.parametrize(("codec", "parquet_name"), [("zstd", "ZSTD"), ("gzip", "GZIP")])
def test_compression_reaches_base_files_and_parquet_log_blocks(tmp_path, codec, parquet_name):
    target = _target(tmp_path, compression=codec)
    w = _writer(target, _batch(range(10), 1))
    w.upsert(_batch(range(10), 1))
    w.upsert(_batch(range(5), 2))  # updates: a log file with a Parquet data block
    (fslice,) = _slices(target.path)

    assert _codecs(pq.ParquetFile(fslice.base_file.path)) == {parquet_name}
    (log,) = fslice.log_files
    data = [b for b in read_log_file(_fs(), log.path) if b.block_type == BlockType.PARQUET_DATA]
    assert len(data) == 1
    # a Parquet data block's content is a whole Parquet file
    assert _codecs(pq.ParquetFile(io.BytesIO(data[0].content()))) == {parquet_name}

    expected = _rows(pa.concat_tables([_batch(range(5), 2), _batch(range(5, 10), 1)]))
    assert _rows(read_ours(target.path)) == expected
    assert _rows(read_hudi_rs(target.path)) == expected


def test_unknown_compression_is_refused(tmp_path):
    with pytest.raises(ValidationError, match="compression"):
        _target(tmp_path, compression="lzo")


# ----------------------------------------------------------------------- log_block_max_size
def test_block_row_ranges_split_evenly_by_in_memory_size():
    rows = _batch(range(100), 1)
    assert block_row_ranges(rows, rows.nbytes) == [(0, 100)]
    ranges = block_row_ranges(rows, rows.nbytes // 4)
    assert len(ranges) in (4, 5)
    assert sum(n for _, n in ranges) == 100 and ranges[0][0] == 0
    assert all(a + n == b for (a, n), (b, _) in zip(ranges, ranges[1:], strict=False))
    # never an empty block, and a single row is one block however large
    assert block_row_ranges(rows, 1) == [(i, 1) for i in range(100)]
    assert block_row_ranges(rows.slice(0, 1), 1) == [(0, 1)]


@pytest.mark.conformance
@pytest.mark.parametrize("block_format", ["parquet", "avro"])
def test_log_block_max_size_splits_a_commit_into_blocks(tmp_path, block_format):
    split = _target(tmp_path / "split", log_block_max_size="8KiB", log_block_format=block_format)
    whole = _target(tmp_path / "whole", log_block_format=block_format)
    kind = BlockType.PARQUET_DATA if block_format == "parquet" else BlockType.AVRO_DATA
    batches = [_batch(range(400), 1), _batch(range(0, 400, 2), 2), _batch(range(0, 400, 3), 3)]
    for target in (split, whole):
        w = _writer(target, batches[0])
        for b in batches:
            w.upsert(b)

    (fslice,) = _slices(split.path)
    fs = _fs()
    per_file = [read_log_file(fs, lf.path) for lf in fslice.log_files]
    assert len(per_file) == 2  # one new log file per commit, each with several data blocks
    for blocks, batch in zip(per_file, batches[1:], strict=True):
        data = [b for b in blocks if b.block_type == kind]
        assert len(data) > 2
        assert len({b.instant_time for b in data}) == 1
        keys = [k for b in data for k in b.records(["_hoodie_record_key"]).column(0).to_pylist()]
        assert sorted(keys, key=int) == [str(i) for i in batch.column("id").to_pylist()]
        assert keys == sorted(keys)  # blocks in key order, no key twice
    (other,) = _slices(whole.path)
    for lf in other.log_files:
        assert [b.block_type for b in read_log_file(fs, lf.path)].count(kind) == 1

    # the same table either way, for us and for hudi-rs; and the index still finds every
    # key (the last update hit keys spread over the split blocks: no duplicates)
    expected = _rows(read_ours(whole.path))
    assert len(expected) == 400
    assert _rows(read_ours(split.path)) == expected
    assert _rows(read_hudi_rs(split.path)) == expected
    assert _rows(read_hudi_rs(whole.path)) == expected


def test_log_block_max_size_must_be_positive(tmp_path):
    with pytest.raises(ValidationError, match="log_block_max_size must be positive"):
        _target(tmp_path, log_block_max_size=0)


# ----------------------------------------------------------------------- log_file_max_size
def test_log_file_max_size_is_refused_with_the_reason(tmp_path):
    with pytest.raises(ValidationError, match="never appends to a log file"):
        _target(tmp_path, log_file_max_size="1MiB")
    yaml = f"""
    pipelines:
      - name: t
        source: {{type: generator}}
        target: {{path: {tmp_path}/t, record_key: id, log_file_max_size: 64MiB}}
    """
    _, problems = parse_pipelines(yaml, "p.yaml")
    (problem,) = problems
    assert problem.path == "pipelines[0].target.log_file_max_size"
    assert "log_block_max_size" in problem.message and problem.line == 5


def test_a_log_file_never_outgrows_one_commit(tmp_path):
    """What makes ``log_file_max_size`` moot: every commit writes a new log file version,
    and an earlier log file is never appended to."""
    target = _target(tmp_path)
    w = _writer(target, _batch(range(50), 1))
    w.upsert(_batch(range(50), 1))
    sizes: dict[str, int] = {}
    for ts in (2, 3, 4):
        w.upsert(_batch(range(0, 50, 2), ts))
        (fslice,) = _slices(target.path)
        now = {lf.path: _fs().status(lf.path).size for lf in fslice.log_files}
        assert {p: now[p] for p in sizes} == sizes  # earlier log files unchanged
        assert len(now) == len(sizes) + 1
        sizes = now


# ------------------------------------------------------------------- url_encode_partitions
def test_a_url_encoded_table_is_written_with_encoded_folders(tmp_path):
    """A table Hudi created with ``urlencode=true`` keeps it: the writer reads the setting
    from hoodie.properties and escapes what it writes too."""
    target = _target(tmp_path, url_encode_partitions=True)
    _writer(target, _batch(range(3), 1)).upsert(_batch(range(3), 1))
    text = Path(properties_path(target.path)).read_text(encoding="latin-1")
    assert "hoodie.datasource.write.partitionpath.urlencode=true" in text
    assert HudiWriter.open(target.path).config.url_encode_partitions


def test_partition_values_are_escaped_as_hudi_does():
    # PartitionPathEncodeUtils.escapePathName: control chars, "#%'*/:=?\{[]^ and DEL
    assert escape_path_name("a/b:c") == "a%2Fb%3Ac"
    assert escape_path_name('"#%\'*/:=?\\{[]^\x7f\x00\x1f') == (
        "%22%23%25%27%2A%2F%3A%3D%3F%5C%7B%5B%5D%5E%7F%00%1F"
    )
    assert escape_path_name("kept: space, é, ü, }, ~, +, @") == "kept%3A space, é, ü, }, ~, +, @"
    for value in ["a/b:c", "100%", "%2F", "x=1/y=2", "é#1", "", "plain"]:
        assert unescape_path_name(escape_path_name(value)) == value
    # Hudi's unescape: a '%' without two hex digits after it stays
    assert unescape_path_name("50%") == "50%" and unescape_path_name("%zz1") == "%zz1"
    assert escape_path_names(pa.array(["a/b", None, "a/b", "c"])).to_pylist() == ["a%2Fb", None, "a%2Fb", "c"]


def test_encoded_partition_paths_parse_back_to_the_values():
    path = partition_path(["city", "day"], ["a/b:c", "2024/01/01"], hive_style=True, url_encode=True)
    assert path == "city=a%2Fb%3Ac/day=2024%2F01%2F01"
    assert partition_values(path, ["city", "day"], True, url_encode=True) == {
        "city": "a/b:c", "day": "2024/01/01",
    }
    plain = partition_path(["city"], ["a/b:c"], hive_style=False, url_encode=True)
    assert plain == "a%2Fb%3Ac" and "/" not in plain
    assert partition_values(plain, ["city"], False, url_encode=True) == {"city": "a/b:c"}
    assert partition_values(plain, ["city"], False) == {"city": "a%2Fb%3Ac"}


@pytest.mark.conformance
@pytest.mark.parametrize("hive", [False, True])
def test_url_encoded_partitions_land_in_one_folder_and_read_back(tmp_path, hive):
    target = _target(tmp_path, url_encode_partitions=True, hive_style=hive)
    first = pa.table({"id": [1, 2, 3], "city": ["a/b:c", "a/b:c", "x y%"], "ts": [1, 1, 1], "note": ["", "", ""]})
    w = _writer(target, first)
    w.upsert(first)
    w.upsert(pa.table({"id": [1], "city": ["a/b:c"], "ts": [2], "note": ["updated"]}))
    prefix = "city=" if hive else ""
    assert sorted(s.partition_path for s in _slices(target.path)) == [f"{prefix}a%2Fb%3Ac", f"{prefix}x y%25"]
    text = Path(properties_path(target.path)).read_text(encoding="latin-1")
    assert "hoodie.datasource.write.partitionpath.urlencode=true" in text
    expected = [
        {"id": 1, "city": "a/b:c", "ts": 2, "note": "updated"},
        {"id": 2, "city": "a/b:c", "ts": 1, "note": ""},
        {"id": 3, "city": "x y%", "ts": 1, "note": ""},
    ]
    assert _rows(read_ours(target.path)) == expected
    assert _rows(read_hudi_rs(target.path)) == expected

"""Base files: Hudi's footer keys, sorted rows, key-only reads, fixture footers."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamer.errors import CorruptDataError, SchemaError
from streamer.fs import FileSystem
from streamer.table.base_file import (
    read_base_file,
    read_footer,
    read_record_keys,
    write_base_file,
)
from streamer.table.bloom import BloomFilter


def _rows(keys: list[str]) -> pa.Table:
    n = len(keys)
    return pa.table(
        {
            "_hoodie_commit_time": ["20250101000000000"] * n,
            "_hoodie_commit_seqno": [f"s{i}" for i in range(n)],
            "_hoodie_record_key": keys,
            "_hoodie_partition_path": ["p=1"] * n,
            "_hoodie_file_name": ["f.parquet"] * n,
            "v": list(range(n)),
            "ts": pa.array([dt.datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=dt.timezone.utc)] * n, pa.timestamp("ns", tz="UTC")),
        }
    )


def test_write_sorts_and_writes_hudi_footer(tmp_path) -> None:
    fs, path = FileSystem(), str(tmp_path / "p=1" / "f.parquet")
    stats = write_base_file(fs, path, _rows(["k3", "k1", "k2"]), avro_schema={"type": "record", "name": "r", "fields": []},
                            extra_kv={"custom": "x"})
    assert (stats.num_rows, stats.min_record_key, stats.max_record_key) == (3, "k1", "k3")
    assert read_record_keys(fs, path).to_pylist() == ["k1", "k2", "k3"]
    footer = read_footer(fs, path)
    assert footer.num_rows == 3 and footer.bloom_type_code == "DYNAMIC_V0"
    assert footer.kv["writer.model.name"] == "avro" and footer.kv["custom"] == "x"
    assert footer.kv["parquet.avro.schema"].startswith('{"type":"record"')
    assert footer.bloom_filter().might_contain_many(["k1", "k2", "k3"]).all()
    # same bytes as a Hudi-default filter built from the keys (what Hudi would write)
    ref = BloomFilter.new_dynamic()
    ref.add_many(["k1", "k2", "k3"])
    assert footer.kv["org.apache.hudi.bloomfilter"] == ref.serialize()
    md = pq.ParquetFile(path).metadata
    assert md.row_group(0).column(0).compression == "SNAPPY"  # the project's one Parquet writer: snappy unless told otherwise
    assert pq.ParquetFile(path).schema_arrow.field("ts").type == pa.timestamp("us", tz="UTC")


def test_projection_reads_only_requested_columns(tmp_path) -> None:
    fs, path = FileSystem(), str(tmp_path / "f.parquet")
    write_base_file(fs, path, _rows(["a", "b"]))
    t = read_base_file(fs, path, ["v", "_hoodie_record_key"])
    assert t.column_names == ["v", "_hoodie_record_key"]
    with pytest.raises(SchemaError, match="nope"):
        read_base_file(fs, path, ["nope"])


def test_missing_meta_columns_and_null_keys_rejected(tmp_path) -> None:
    fs = FileSystem()
    with pytest.raises(SchemaError, match="_hoodie_file_name"):
        write_base_file(fs, str(tmp_path / "a.parquet"), _rows(["a"]).drop_columns(["_hoodie_file_name"]))
    bad = _rows(["a", "b"]).set_column(2, "_hoodie_record_key", pa.array(["a", None]))
    with pytest.raises(SchemaError, match="without _hoodie_record_key"):
        write_base_file(fs, str(tmp_path / "b.parquet"), bad)


def test_not_parquet_is_corrupt_data_naming_the_file(tmp_path) -> None:
    p = tmp_path / "x.parquet"
    p.write_bytes(b"definitely not parquet")
    with pytest.raises(CorruptDataError, match="x.parquet"):
        read_footer(FileSystem(), str(p))


@pytest.mark.conformance
def test_fixture_footers(hudi_fixtures_dir) -> None:
    from tests.support.fixture_tables import fixture_table_path

    root = fixture_table_path(hudi_fixtures_dir, "sample_table__cow__v6_complexkeygen_hivestyle")
    fs = FileSystem()
    files = sorted(root.rglob("*.parquet"))
    assert files
    for f in files:
        footer = read_footer(fs, str(f))
        keys = read_record_keys(fs, str(f)).to_pylist()
        assert footer.min_record_key == min(keys) and footer.max_record_key == max(keys)
        assert footer.bloom_filter().might_contain_many(keys).all()
        assert "parquet.avro.schema" in footer.kv

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


# ----------------------------------------------------------------------------- encodings
def _encodings_of(data: bytes) -> dict[str, tuple[str, ...]]:
    import io

    md = pq.read_metadata(io.BytesIO(data))
    return {md.row_group(0).column(i).path_in_schema: md.row_group(0).column(i).encodings
            for i in range(md.num_columns)}


def test_plain_columns_follows_parquet_mrs_dictionary_rule() -> None:
    import numpy as np

    from streamer.table.base_file import parquet_bytes, plain_columns

    n = 20_000
    rng = np.random.default_rng(7)
    t = pa.table({
        "_hoodie_record_key": [f"k{i:06d}" for i in range(n)],
        "_hoodie_commit_seqno": [f"s_{i}" for i in range(n)],
        "unique_id": np.arange(n, dtype=np.int64),
        "price": rng.random(n),
        "uuid": [f"{i:032x}" for i in rng.integers(0, 2**62, n)],
        "city": np.array(["sf", "nyc", "oslo"])[rng.integers(0, 3, n)],
        "day": np.repeat(np.arange(20, dtype=np.int32), n // 20),  # runs: 1,000 of each
        "skewed": np.where(rng.random(n) < 0.9, 0, np.arange(n)).astype(np.int64),  # 10% unique
        "flag": rng.random(n) < 0.5,
        "nested": pa.array([{"a": i} for i in range(n)]),
        "nulls": pa.nulls(n, pa.int64()),
    })
    plain = plain_columns(t)
    # unique values: dictionary page + indices outweigh the values themselves
    assert {"unique_id", "price", "uuid"} <= plain
    # repeating values, a skewed column (the estimate is a lower bound on distinct values),
    # booleans, nested and all-null columns keep Arrow's dictionary default, as do meta columns
    assert not plain & {"city", "day", "skewed", "flag", "nested", "nulls",
                        "_hoodie_record_key", "_hoodie_commit_seqno"}, plain
    assert plain_columns(t) == plain, "the same rows always decide the same way"
    assert plain_columns(t.slice(0, 10)) == set(), "too few rows to matter"

    enc = _encodings_of(parquet_bytes(t, {}))
    for c in ("unique_id", "price", "uuid"):
        assert "RLE_DICTIONARY" not in enc[c], (c, enc[c])
    for c in ("city", "day", "skewed"):
        assert "RLE_DICTIONARY" in enc[c], (c, enc[c])
    back = pq.read_table(__import__("io").BytesIO(parquet_bytes(t, {})))
    assert back.equals(t)


def test_plain_columns_are_smaller_than_their_dictionary() -> None:
    """The rule's point: for unique values, PLAIN is the smaller encoding."""
    import io

    import numpy as np

    from streamer.table.base_file import parquet_bytes

    t = pa.table({"_hoodie_record_key": [f"k{i:06d}" for i in range(50_000)],
                  "price": np.random.default_rng(1).random(50_000)})
    ours = len(parquet_bytes(t, {}))
    sink = io.BytesIO()
    pq.write_table(t, sink, compression="snappy", use_dictionary=["price"], store_schema=False,
                   column_encoding={"_hoodie_record_key": "DELTA_BYTE_ARRAY"},
                   write_page_checksum=True)
    assert ours < len(sink.getvalue())

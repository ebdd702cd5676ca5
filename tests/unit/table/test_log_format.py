"""Log format: our encoders through our reader, and corruption handled like Hudi."""

from __future__ import annotations

import datetime as dt
import decimal
import struct

import pyarrow as pa
import pytest

from streamer.fs import FileSystem
from streamer.table.bloom import BloomFilter
from streamer.table.log_format import (
    MAGIC,
    BlockType,
    HeaderKey,
    encode_command_block,
    encode_data_block,
    encode_delete_block,
    read_log_file,
)
from tests.support.log_appends import append_blocks

I1, I2, I3 = "20250101000000001", "20250101000000002", "20250101000000003"


def _table(keys: list[str]) -> pa.Table:
    n = len(keys)
    return pa.table(
        {
            "_hoodie_commit_time": [I1] * n,
            "_hoodie_commit_seqno": [f"{I1}_0_{i}" for i in range(n)],
            "_hoodie_record_key": keys,
            "_hoodie_partition_path": ["p"] * n,
            "_hoodie_file_name": ["f-0"] * n,
            "amount": pa.array([decimal.Decimal("1.25")] * n, pa.decimal128(10, 2)),
            "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)] * n, pa.timestamp("us", tz="UTC")),
            "tags": pa.array([[("a", 1)]] * n, pa.map_(pa.string(), pa.int64())),
        }
    )


@pytest.fixture
def fs() -> FileSystem:
    return FileSystem()


def _write(fs: FileSystem, tmp_path, blocks: list[bytes]) -> str:
    path = str(tmp_path / ".f-0_20250101000000000.log.1_0-0-0")
    append_blocks(fs, path, blocks)
    return path


@pytest.mark.parametrize("lazy", [True, False])
def test_parquet_block_roundtrip_sorted_with_index(fs, tmp_path, lazy) -> None:
    blk = encode_data_block(
        _table(["k3", "k1", "k2"]), {HeaderKey.INSTANT_TIME: I1}, parquet_kv_metadata={"slice.max": "k9"}
    )
    path = _write(fs, tmp_path, [blk])
    (b,) = read_log_file(fs, path, lazy=lazy)
    assert b.block_type == BlockType.PARQUET_DATA and b.instant_time == I1
    assert b.record_keys().to_pylist() == ["k1", "k2", "k3"]
    md = b.parquet_metadata()
    assert md[b"hoodie_min_record_key"] == b"k1" and md[b"hoodie_max_record_key"] == b"k3"
    assert md[b"hoodie_bloom_filter_type_code"] == b"DYNAMIC_V0" and md[b"slice.max"] == b"k9"
    bf = BloomFilter.from_footer(md[b"org.apache.hudi.bloomfilter"], md[b"hoodie_bloom_filter_type_code"])
    assert bf.might_contain_many(["k1", "k2", "k3"]).all()
    t = b.records(["_hoodie_record_key", "amount"])
    assert t.column_names == ["_hoodie_record_key", "amount"]
    assert t.column("amount").to_pylist() == [decimal.Decimal("1.25")] * 3
    assert b.schema["fields"][0]["name"] == "_hoodie_commit_time"  # SCHEMA header derived


def test_avro_block_roundtrip(fs, tmp_path) -> None:
    table = _table(["a", "b"])
    path = _write(fs, tmp_path, [encode_data_block(table, {HeaderKey.INSTANT_TIME: I1}, kind=BlockType.AVRO_DATA)])
    (b,) = read_log_file(fs, path)
    assert b.block_type == BlockType.AVRO_DATA
    assert b.records().to_pylist() == table.to_pylist()
    assert b.record_keys().to_pylist() == ["a", "b"]


@pytest.mark.parametrize(
    "values,typ",
    [
        ([5, None], pa.int64()),
        ([5, 6], pa.int32()),
        ([1.5, 2.5], pa.float64()),
        (["x", "y"], pa.string()),
        ([dt.date(2024, 1, 2), None], pa.date32()),
        ([dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc), None], pa.timestamp("us", tz="UTC")),
        ([decimal.Decimal("1.5"), None], pa.decimal128(30, 15)),
    ],
)
def test_delete_block_roundtrip_ordering_types(fs, tmp_path, values, typ) -> None:
    keys = pa.table(
        {"_hoodie_record_key": ["a", "b"], "_hoodie_partition_path": ["p", "q"], "ordering_value": pa.array(values, typ)}
    )
    path = _write(fs, tmp_path, [encode_delete_block(keys, {HeaderKey.INSTANT_TIME: I2})])
    (b,) = read_log_file(fs, path)
    d = b.deletes()
    assert d.column("_hoodie_record_key").to_pylist() == ["a", "b"]
    assert d.column("_hoodie_partition_path").to_pylist() == ["p", "q"]
    assert d.column("ordering_value").type == typ
    assert d.column("ordering_value").to_pylist() == pa.array(values, typ).to_pylist()


def test_delete_without_ordering_writes_hudi_default_zero(fs, tmp_path) -> None:
    keys = pa.table({"_hoodie_record_key": ["a"], "_hoodie_partition_path": [""]})
    path = _write(fs, tmp_path, [encode_delete_block(keys, {HeaderKey.INSTANT_TIME: I2})])
    assert read_log_file(fs, path)[0].deletes().column("ordering_value").to_pylist() == [0]


def test_command_and_compacted_headers(fs, tmp_path) -> None:
    rb = encode_command_block({HeaderKey.INSTANT_TIME: I3, HeaderKey.TARGET_INSTANT_TIME: I1})
    data = encode_data_block(
        _table(["k"]), {HeaderKey.INSTANT_TIME: I3, HeaderKey.COMPACTED_BLOCK_TIMES: f"{I1},{I2}"}
    )
    path = _write(fs, tmp_path, [rb, data])
    c, d = read_log_file(fs, path)
    assert c.is_rollback and c.target_instant_time == I1 and c.header[HeaderKey.COMMAND_BLOCK_TYPE] == "0"
    assert d.compacted_block_times == [I1, I2]
    assert c.offset == 0 and d.offset == c.size


def test_writer_refuses_unknown_header_keys() -> None:
    with pytest.raises(ValueError, match="unknown"):
        encode_command_block({HeaderKey.TARGET_INSTANT_TIME: I1, 7: "true"})


def test_append_to_existing_log(fs, tmp_path) -> None:
    path = _write(fs, tmp_path, [encode_data_block(_table(["a"]), {HeaderKey.INSTANT_TIME: I1})])
    append_blocks(fs, path, [encode_command_block({HeaderKey.INSTANT_TIME: I2, HeaderKey.TARGET_INSTANT_TIME: I1})])
    assert [b.block_type for b in read_log_file(fs, path)] == [BlockType.PARQUET_DATA, BlockType.COMMAND]


# -- corruption ------------------------------------------------------------------------------
def _good() -> tuple[bytes, bytes]:
    a = encode_data_block(_table(["a"]), {HeaderKey.INSTANT_TIME: I1})
    b = encode_command_block({HeaderKey.INSTANT_TIME: I2, HeaderKey.TARGET_INSTANT_TIME: I1})
    return a, b


def _kinds(fs, tmp_path, data: bytes, lazy: bool = True):
    p = tmp_path / "bad.log.1_0-0-0"
    p.write_bytes(data)
    blocks = read_log_file(fs, str(p), lazy=lazy)
    return blocks, [b.block_type for b in blocks]


@pytest.mark.parametrize("lazy", [True, False])
def test_torn_last_block_is_corrupt_and_earlier_blocks_survive(fs, tmp_path, lazy) -> None:
    a, b = _good()
    for cut in (3, 10, 20, len(b) // 2, len(b) - 1):
        blocks, kinds = _kinds(fs, tmp_path, a + b[:cut], lazy)
        assert kinds == [BlockType.PARQUET_DATA, BlockType.CORRUPT], cut
        assert blocks[1].offset == len(a) and str(tmp_path) in blocks[1].corrupt_reason
        assert f"offset {len(a)}" in blocks[1].corrupt_reason
        assert blocks[0].record_keys().to_pylist() == ["a"]


@pytest.mark.parametrize(
    "mutate,why",
    [
        (lambda b: b"XXXXXX" + b[6:], "magic"),
        (lambda b: b[:6] + struct.pack(">q", -5) + b[14:], "impossible block size"),
        (lambda b: b[:6] + struct.pack(">q", 10**12) + b[14:], "past end of file"),
        (lambda b: b[:6] + struct.pack(">q", len(b) - 14 - 1) + b[14:], "does not match"),
        (lambda b: b[:18] + struct.pack(">i", 99) + b[22:], "unknown block type"),
        (lambda b: b[:22] + struct.pack(">i", -1) + b[26:], "entry count"),
    ],
)
def test_damaged_block_then_resync_on_next_magic(fs, tmp_path, mutate, why) -> None:
    a, b = _good()
    blocks, kinds = _kinds(fs, tmp_path, mutate(b) + a + b)
    assert kinds == [BlockType.CORRUPT, BlockType.PARQUET_DATA, BlockType.COMMAND]
    assert why in blocks[0].corrupt_reason
    assert blocks[1].offset == len(b)  # resynchronised exactly at the next magic
    assert blocks[2].is_rollback


def test_garbage_between_blocks_and_trailing_bytes(fs, tmp_path) -> None:
    a, b = _good()
    blocks, kinds = _kinds(fs, tmp_path, a + b"\x00garbage\xff" + b + b"#HU")
    assert kinds == [BlockType.PARQUET_DATA, BlockType.CORRUPT, BlockType.COMMAND, BlockType.CORRUPT]
    assert blocks[1].size == len(b"\x00garbage\xff")


def test_magic_inside_garbage_does_not_hang(fs, tmp_path) -> None:
    junk = (MAGIC + b"\xff" * 9) * 50
    blocks, kinds = _kinds(fs, tmp_path, junk)
    assert set(kinds) == {BlockType.CORRUPT}
    assert sum(b.size for b in blocks) == len(junk)


def test_empty_log_has_no_blocks(fs, tmp_path) -> None:
    assert _kinds(fs, tmp_path, b"")[1] == []

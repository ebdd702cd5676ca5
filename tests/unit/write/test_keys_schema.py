"""Key generators, batch combining and schema rules (fast, no table needed)."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from streamer.errors import CommitConflictError, ConfigError, SchemaError
from streamer.fs import FileSystem
from streamer.write import HudiWriter, TableConfig
from streamer.write.keygen import build_keys
from streamer.write.lock import WriterLock
from streamer.write.markers import IOType, Marker, create_marker, list_markers
from streamer.write.prepare import prepare_batch
from streamer.write.schema import reconcile


def test_simple_and_complex_keys_match_hudi():
    t = pa.table({"id": [1, 2], "name": ["a", ""], "p": [10, None], "q": ["x", "y"]})
    k = build_keys(t, TableConfig("t", ("id",), ("p",), None))
    assert k.record_keys.to_pylist() == ["1", "2"]
    assert k.partition_paths.to_pylist() == ["10", "__HIVE_DEFAULT_PARTITION__"]
    k = build_keys(t, TableConfig("t", ("id", "name"), ("p", "q"), None, keygen="complex",
                                  hive_style_partitioning=True))
    assert k.record_keys.to_pylist() == ["id:1,name:a", "id:2,name:__empty__"]
    assert k.partition_paths.to_pylist() == ["p=10/q=x", "p=__HIVE_DEFAULT_PARTITION__/q=y"]
    k = build_keys(t, TableConfig("t", ("id",), (), None, keygen="non_partitioned"))
    assert k.partition_paths.to_pylist() == ["", ""]


def test_timestamp_keygen_day_hour_and_strings():
    t = pa.table({"id": [1], "ms": [1_700_000_000_123], "s": [1_700_000_000], "d": ["2024-03-05 17:04:00"]})
    from streamer.table.identity import TimestampKeyGenConfig

    def parts(field, **kw):
        cfg = TableConfig("t", ("id",), (field,), None, keygen="timestamp", timestamp=TimestampKeyGenConfig(**kw))
        return build_keys(t, cfg).partition_paths.to_pylist()

    assert parts("ms") == ["2023/11/14"]
    assert parts("s", timestamp_type="UNIX_TIMESTAMP", output_format="yyyy-MM-dd-HH") == ["2023-11-14-22"]
    assert parts("d", timestamp_type="DATE_STRING", output_format="yyyyMMddHH") == ["2024030517"]


def test_null_key_is_refused_with_field_name():
    with pytest.raises(SchemaError, match="'id'"):
        build_keys(pa.table({"id": [None, 1], "p": [1, 1]}), TableConfig("t", ("id",), ("p",), None))
    with pytest.raises(ConfigError):
        TableConfig("t", ("a", "b"), ("p",), None, keygen="simple")


def test_a_binary_key_that_is_not_text_is_refused_with_field_name():
    """Hudi's keys are text: UTF-8 bytes key their row as that text, other bytes (a
    Postgres bytea key) are refused naming the field, not failed on Arrow's cast."""
    cfg = TableConfig("t", ("id",), ("p",), None)
    keys = build_keys(pa.table({"id": pa.array([b"abc"], pa.binary()), "p": [1]}), cfg)
    assert keys.record_keys.to_pylist() == ["abc"]
    with pytest.raises(SchemaError, match="field 'id': a binary value that is not UTF-8 text"):
        build_keys(pa.table({"id": pa.array([b"\xff\xfe"], pa.binary()), "p": [1]}), cfg)


def test_combine_keeps_latest_ordering_and_splits_deletes():
    t = pa.table({"id": [1, 1, 2, 2, 3], "p": ["a"] * 5, "ts": [5, 3, 1, 1, 9], "v": list("vwxyz"),
                  "_hoodie_is_deleted": [False, False, False, False, True]})
    b = prepare_batch(t, TableConfig("t", ("id",), ("p",), "ts"))
    assert sorted((r["id"], r["v"]) for r in b.upserts.to_pylist()) == [(1, "v"), (2, "y")]
    assert b.deletes.column("_hoodie_record_key").to_pylist() == ["3"]


def test_schema_rules():
    table = pa.schema([("id", pa.int64()), ("v", pa.string()), ("amount", pa.float32())])
    ok = reconcile(table, pa.schema([("id", pa.int64()), ("v", pa.string()), ("new", pa.int32())]), ("id",))
    assert ok.evolved and ok.schema.names == ["id", "v", "amount", "new"]
    widened = reconcile(table, pa.schema([("id", pa.int64()), ("amount", pa.float64())]), ("id",))
    assert widened.schema.field("amount").type == pa.float64()
    narrower = reconcile(table, pa.schema([("id", pa.int32()), ("amount", pa.float32())]), ("id",))
    assert not narrower.evolved and narrower.schema.field("id").type == pa.int64()  # the batch is cast up
    with pytest.raises(SchemaError, match="'id'"):
        reconcile(table, pa.schema([("id", pa.string())]), ("id",))
    with pytest.raises(SchemaError, match="'v'"):
        reconcile(table, pa.schema([("id", pa.int64()), ("v", pa.int64())]), ("id",))
    with pytest.raises(SchemaError, match="'id'"):
        reconcile(table, pa.schema([("v", pa.string())]), ("id",))


def test_incompatible_batch_writes_nothing(tmp_path):
    path = str(tmp_path / "t")
    w = HudiWriter.create(path, TableConfig("s", ("id",), ("p",), "ts"))
    w.upsert(pa.table({"id": [1], "p": ["a"], "ts": [1], "v": ["x"]}))
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(SchemaError, match=re.escape(f"{path}: field 'v'")):  # the table and the field
        w.upsert(pa.table({"id": [2], "p": ["a"], "ts": [2], "v": [3.5]}))
    with pytest.raises(SchemaError, match="'id'"):
        w.upsert(pa.table({"p": ["a"], "ts": [2], "v": ["y"]}))
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    res = w.upsert(pa.table({"id": [2], "p": ["a"], "ts": [2], "v": ["y"], "extra": [7]}))
    assert res.num_inserts == 1


def test_markers_round_trip(tmp_path):
    fs = FileSystem()
    m = Marker("p=1", "f-0_0-0-0_001.parquet", IOType.CREATE)
    create_marker(fs, str(tmp_path), "001", m)
    create_marker(fs, str(tmp_path), "001", Marker("", "x_0-0-0_001.parquet", IOType.APPEND))
    assert (tmp_path / ".hoodie/.temp/001/p=1/f-0_0-0-0_001.parquet.marker.CREATE").exists()
    assert list_markers(fs, str(tmp_path), "001")[1] == m


def test_second_live_writer_conflicts(tmp_path):
    fs = FileSystem()
    (tmp_path / ".hoodie").mkdir()
    with WriterLock(fs, str(tmp_path)), pytest.raises(CommitConflictError):
        WriterLock(fs, str(tmp_path)).acquire()
    WriterLock(fs, str(tmp_path)).acquire().release()  # released: free again

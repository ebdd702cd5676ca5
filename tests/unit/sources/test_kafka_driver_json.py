"""``streamer.sources.kafka.driver_json.decode`` without Spark: what it declines, and that it
never hands Arrow's reader a record that crashes it (a bare top-level ``null``). Its
agreement with Spark's ``from_json`` is tested in
``tests/integration/sources/test_kafka_driver_json.py``."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from streamer.sources.kafka.driver_json import decode

FIELDS = [pa.field("id", pa.string()), pa.field("ts", pa.int64()), pa.field("fare", pa.float64())]
META = {"_kafka_partition": "partition", "_kafka_offset": "offset"}


def _raw(values: list[bytes | None]) -> pa.Table:
    n = len(values)
    return pa.table({
        "topic": pa.array(["t"] * n, pa.string()),
        "partition": pa.array([0] * n, pa.int32()),
        "offset": pa.array(range(n), pa.int64()),
        "timestamp": pa.array([dt.datetime(2026, 1, 1)] * n, pa.timestamp("us", tz="UTC")),
        "value": pa.array(values, pa.binary()),
    })


def test_ordinary_records_become_rows_with_their_metadata_columns():
    got = decode(_raw([b'{"id": "a", "ts": 1, "fare": 2}', b' {"ts": 2, "id": "b", "x": [1]} ']), FIELDS, META, None)
    assert got is not None
    assert got.column_names == ["id", "ts", "fare", "_kafka_partition", "_kafka_offset"]
    assert got.to_pylist() == [
        {"id": "a", "ts": 1, "fare": 2.0, "_kafka_partition": 0, "_kafka_offset": 0},
        {"id": "b", "ts": 2, "fare": None, "_kafka_partition": 0, "_kafka_offset": 1},
    ]


@pytest.mark.parametrize("odd", [
    None, b"", b"   ", b"null", b" null ", b"5", b"[]", b'"s"', b"\xff{}", b'{"id": "a"} {"id": "b"}',
    b'{"id": "a",\n"ts": 1}', b'{"id": "a\\udc00"}', b'{"id": 5}', b'{"ts": 1.5}', b'{"id": "a"', b'{"id": "a", "id": "b"}',
    b'{"id": "' + b"x" * 200 + b'"}',
])
def test_any_other_record_declines_the_whole_batch(odd):
    assert decode(_raw([b'{"id": "a", "ts": 1}', odd]), FIELDS, META, max_record_bytes=100) is None
    assert decode(_raw([odd]), FIELDS, META, max_record_bytes=100) is None  # first: a lone ``null`` crashed the reader

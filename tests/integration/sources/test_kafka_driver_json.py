"""The driver's decode of a Kafka JSON batch against Spark's, the oracle
(``sources/kafka/driver_json.py``, ``Batch.driver_rows``).

Each payload below is prepared twice from the same raw Kafka rows: through
:func:`streamer.pipeline.batch.prepare` as the pipeline runs it (the driver decodes a
batch of ordinary records) and with ``driver_rows`` taken away (Spark's ``from_json``
decodes it). Rows written and error rows must be the same - values, column types and
nullability -, the ordinary payloads must take the driver's path, and every other one
must be left to Spark (a tombstone, a top-level ``null``, which crashes Arrow's reader,
a record Spark reads in its own way).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math

import pyarrow as pa
import pytest

from streamer.config.loader import parse_pipelines
from streamer.pipeline.batch import prepare
from streamer.sources import build_source
from streamer.sources.kafka import RAW_KAFKA_DDL
from streamer.sources.position import KafkaOffsets
from tests.support.trip_model import kafka_pipeline_yaml

pytestmark = [pytest.mark.integration]

SCHEMA = "uuid STRING, ts BIGINT, city STRING, fare DOUBLE, seats INT, shared BOOLEAN"
BASE = {"uuid": "u-0", "ts": 1, "city": "sf", "fare": 2.5, "seats": 3, "shared": False}


def _j(**changes: object) -> bytes:
    return json.dumps({**BASE, **changes}, ensure_ascii=False).encode()


#: Records the driver decodes (the whole batch of them, and each beside BASE).
ORDINARY: dict[str, bytes] = {
    "plain": _j(uuid="u-1"),
    "fields missing but the key and ordering": b'{"uuid": "u-2", "ts": 7}',
    "nulls": b'{"uuid": "u-3", "ts": 8, "city": null, "fare": null, "seats": null, "shared": null}',
    "unknown fields, nested": b'{"uuid": "u-4", "ts": 9, "x": {"y": [1, {"z": null}], "w": "v"}, "fare": 1}',
    "escapes": b'{"uuid": "u-5\\"\\\\\\/\\b\\f\\t", "ts": 1, "city": "caf\\u00e9 \\u4e2d"}',
    "utf-8 text": _j(uuid="u-6 é 中 😀"),
    "whitespace around and inside": b' \t{ "uuid" :"u-7" ,\t"ts": 2 } \t',
    "an integer double": b'{"uuid": "u-8", "ts": 3, "fare": 5}',
    "exponents and signs": b'{"uuid": "u-9", "ts": -0, "fare": -1.5e3, "seats": -2147483648}',
    "a long integer double": b'{"uuid": "u-10", "ts": 9223372036854775807, "fare": 123456789012345678901234567890}',
    "fields in another case": b'{"uuid": "u-11", "ts": 4, "City": "ams", "FARE": 3}',
    "tiny and huge doubles": b'{"uuid": "u-12", "ts": 5, "fare": 4.9e-324, "seats": 0}',
    "booleans": b'{"uuid": "u-13", "ts": 6, "shared": true}',
    "NaN": b'{"uuid": "u-14", "ts": 1, "fare": NaN}',
    "infinities": b'{"uuid": "u-15", "ts": 1, "fare": -Infinity}',
}

#: Records the driver leaves to Spark: each makes its batch go through ``from_json``.
LEFT_TO_SPARK: dict[str, bytes | None] = {
    "tombstone": None,
    "not UTF-8": b'{"uuid": "u-20", "ts": 1, "city": "\xff\xfe"}',
    "empty": b"",
    "blank": b"  \t ",
    "top-level null": b"null",
    "top-level number": b"5",
    "top-level array": b'[{"uuid": "u-21", "ts": 1}]',
    "top-level string": b'"u-22"',
    "two objects": b'{"uuid": "u-23", "ts": 1} {"uuid": "u-24", "ts": 2}',
    "two objects around null": b'{"uuid": "u-25", "ts": 1} null {"uuid": "u-26", "ts": 2}',
    "trailing text": b'{"uuid": "u-27", "ts": 1} x',
    "single quotes": b"{'uuid': 'u-28', 'ts': 1}",
    "trailing comma": b'{"uuid": "u-29", "ts": 1,}',
    "a line break inside": b'{"uuid": "u-30",\n "ts": 1}',
    "a carriage return inside": b'{"uuid": "u-31",\r "ts": 1}',
    "a raw tab in a string": b'{"uuid": "u-32\tx", "ts": 1}',
    "a lone surrogate escape": b'{"uuid": "u-33\\ud800", "ts": 1}',
    "a surrogate pair escape": b'{"uuid": "u-34\\ud83d\\ude00", "ts": 1}',
    "a byte order mark": b'\xef\xbb\xbf{"uuid": "u-35", "ts": 1}',
    "a number for a string": b'{"uuid": "u-36", "ts": 1, "city": 5}',
    "an object for a string": b'{"uuid": "u-37", "ts": 1, "city": {"a": 1}}',
    "a string for a number": b'{"uuid": "u-38", "ts": "1"}',
    "a fraction for a long": b'{"uuid": "u-39", "ts": 1.0}',
    "an exponent for a long": b'{"uuid": "u-40", "ts": 1e2}',
    "a long over its range": b'{"uuid": "u-41", "ts": 9223372036854775808}',
    "an int over its range": b'{"uuid": "u-42", "ts": 1, "seats": 2147483648}',
    "a number for a boolean": b'{"uuid": "u-43", "ts": 1, "shared": 1}',
    "a string for a boolean": b'{"uuid": "u-44", "ts": 1, "shared": "true"}',
    "INF": b'{"uuid": "u-45", "ts": 1, "fare": INF}',
    "a quoted NaN": b'{"uuid": "u-46", "ts": 1, "fare": "NaN"}',
    "a double over its range": b'{"uuid": "u-47", "ts": 1, "fare": 1e400}',
    "leading zeros": b'{"uuid": "u-48", "ts": 007}',
    "a duplicate field": b'{"uuid": "u-49", "ts": 1, "ts": 2}',
    "a comment": b'{"uuid": "u-50", /* c */ "ts": 1}',
    "no key": b'{"ts": 1, "city": "sf"}',
    "a null key": b'{"uuid": null, "ts": 1}',
    "a blank key": b'{"uuid": "   ", "ts": 1}',
    "no ordering value": b'{"uuid": "u-51", "ts": null}',
    "over max_record_bytes": _j(uuid="u-52", city="x" * 3000),
}


#: Of those, the ones the driver decodes and the key check then sends to Spark.
UNKEYABLE = ("no key", "a null key", "a blank key", "no ordering value")


def _config(tmp_path, include_metadata: bool):
    extra = f', max_record_bytes: 2000, include_metadata: {str(include_metadata).lower()}'
    text = "pipelines:\n" + kafka_pipeline_yaml("dj", "127.0.0.1:9", "dj", str(tmp_path / "lake"), source_extra=extra)
    (config,), problems = parse_pipelines(text.replace(
        '"uuid STRING, ts BIGINT, city STRING, fare DOUBLE, _hoodie_is_deleted BOOLEAN"', f'"{SCHEMA}"'))
    assert not problems and config.source.schema_ddl == SCHEMA
    return config


def _raw(spark, payloads: list[bytes | None]):
    at = dt.datetime(2026, 11, 26, 12, 0, tzinfo=dt.timezone.utc)
    rows = [(None, p, "dj", i % 2, 100 + i, at + dt.timedelta(seconds=i), 0) for i, p in enumerate(payloads)]
    return spark.createDataFrame(rows, RAW_KAFKA_DDL)


def _batch(spark, config, payloads: list[bytes | None]):
    source = build_source(config.source)
    start = KafkaOffsets(topic="dj", partitions={0: 100, 1: 101})
    end = KafkaOffsets(topic="dj", partitions={0: 100 + len(payloads), 1: 101 + len(payloads)})
    batch = source._batch(spark, _raw(spark, payloads), start, end)
    assert batch.driver_rows is not None
    return source, batch


def _both(spark, config, payloads: list[bytes | None]):
    """(prepared by the pipeline's path, prepared by Spark's decode, driver rows or None)."""
    source, batch = _batch(spark, config, payloads)
    driver = batch.driver_rows()
    ours = prepare(config, spark, batch, "kafka", "{}", source.record_identity())
    spark_only = dataclasses.replace(batch, driver_rows=None)
    theirs = prepare(config, spark, spark_only, "kafka", "{}", source.record_identity())
    return ours, theirs, driver


def _values(table: pa.Table) -> list[dict]:
    """Rows with NaN as a string: NaN equals nothing, not even itself."""
    return [{k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
            for row in table.to_pylist()]


def _same(ours, theirs) -> str | None:
    if _values(ours.good) != _values(theirs.good) or ours.good.schema != theirs.good.schema:
        return f"rows differ:\n{ours.good.schema}\n{ours.good.to_pylist()}\nSpark:\n{theirs.good.schema}\n{theirs.good.to_pylist()}"
    a, b = (p.errors.drop_columns(["error_time"]).to_pylist() for p in (ours, theirs))
    if a != b or (ours.read, ours.written) != (theirs.read, theirs.written):
        return f"errors differ: {a} / Spark: {b}"
    return None


@pytest.mark.parametrize("include_metadata", [True, False])
def test_a_batch_of_ordinary_records_is_decoded_on_the_driver_as_spark_decodes_it(spark, tmp_path, include_metadata):
    config = _config(tmp_path, include_metadata)
    ours, theirs, driver = _both(spark, config, [_j(), *ORDINARY.values()])
    assert driver is not None, "the driver declined a batch of ordinary records"
    assert _same(ours, theirs) is None, _same(ours, theirs)
    assert ours.written == len(ORDINARY) + 1 and not ours.errored
    assert isinstance(ours.good, pa.Table)


def test_each_other_record_sends_its_batch_through_spark_with_the_same_result(spark, tmp_path):
    config = _config(tmp_path, include_metadata=True)
    wrong: list[str] = []
    for name, payload in LEFT_TO_SPARK.items():
        if name in UNKEYABLE:  # decoded on the driver; the key check sends the batch to Spark
            ours, theirs, driver = _both(spark, config, [_j(), payload])
            assert driver is not None, name
            problem = _same(ours, theirs)
            if problem is not None or ours.errored != 1:
                wrong.append(f"{name}: {problem or 'no error row'}")
        elif _batch(spark, config, [_j(), payload])[1].driver_rows() is not None:
            # the pipeline's path is then Spark's own: nothing more to compare
            wrong.append(f"{name}: decoded on the driver")
    assert not wrong, "\n".join(wrong)


def test_a_record_spark_flags_keeps_the_batch_on_spark_with_its_error_row(spark, tmp_path):
    config = _config(tmp_path, include_metadata=True)
    ours, theirs, _ = _both(spark, config, [_j(), b'{"uuid": "  ", "ts": 1}', None])
    assert _same(ours, theirs) is None
    assert ours.written == 1 and ours.errored == 2


def test_after_a_declined_batch_the_next_ones_go_straight_to_spark(spark, tmp_path):
    """A declined batch reads its records twice: the following DRIVER_RETRY_AFTER batches
    of the source skip the driver, then it tries again."""
    from streamer.sources.kafka import DRIVER_RETRY_AFTER

    config = _config(tmp_path, include_metadata=True)
    source = build_source(config.source)
    start = KafkaOffsets(topic="dj", partitions={0: 100, 1: 101})
    end = KafkaOffsets(topic="dj", partitions={0: 102, 1: 103})
    declined = source._batch(spark, _raw(spark, [_j(), b"null"]), start, end)
    assert declined.driver_rows is not None and declined.driver_rows() is None
    tries = [source._batch(spark, _raw(spark, [_j()]), start, end).driver_rows for _ in range(DRIVER_RETRY_AFTER + 1)]
    assert tries[:-1] == [None] * DRIVER_RETRY_AFTER and tries[-1] is not None
    assert tries[-1]() is not None

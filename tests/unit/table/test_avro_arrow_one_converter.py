"""Issue 28: one Avro <-> Arrow converter. For every Avro logical type and complex type the
Kafka Avro source (and the Avro files source) and the table format (log blocks, commit
metadata) give the same Arrow type and the same values; Arrow -> Avro -> Arrow round trips.

Each case is a record with the type three times: plain, ``[null, T]`` and ``[T, null]``
(named types are defined once and referenced by name after that).
"""

from __future__ import annotations

import copy
import datetime as dt
import decimal
import io
import json
import struct
import uuid
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from streamer.errors import SchemaError
from streamer.sources.avro import spark_arrow_schema
from streamer.sources.kafka.avro import (
    ERROR_FIELD,
    META_FIELDS,
    _value_schema,
    confluent_frame,
    make_decoder,
)
from streamer.table.avro_schema import arrow_to_avro, avro_records_to_arrow, avro_to_arrow
from streamer.table.log_content import AVRO_BLOCK_VERSION, decode_avro_records, encode_avro_records

UTC = dt.timezone.utc
NS = "com.example.orders"


def _fixed(name: str, size: int, **extra: Any) -> dict[str, Any]:
    return {"type": "fixed", "name": name, "size": size, **extra}


# (id, Avro type, Arrow type, sample value as fastavro takes it, the value as Arrow gives it back)
CASES: list[tuple[str, Any, pa.DataType, Any, Any]] = [
    ("boolean", "boolean", pa.bool_(), True, True),
    ("int", "int", pa.int32(), -7, -7),
    ("long", "long", pa.int64(), 2**40, 2**40),
    ("float", "float", pa.float32(), 1.5, 1.5),
    ("double", "double", pa.float64(), 2.25, 2.25),
    ("bytes", "bytes", pa.binary(), b"\x00\xff", b"\x00\xff"),
    ("string", "string", pa.string(), "h\u00e9llo", "h\u00e9llo"),
    ("decimal-bytes", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
     pa.decimal128(10, 2), decimal.Decimal("12345678.90"), decimal.Decimal("12345678.90")),
    ("decimal-fixed", _fixed("amount", 5, logicalType="decimal", precision=10, scale=2),
     pa.decimal128(10, 2), decimal.Decimal("-0.05"), decimal.Decimal("-0.05")),
    ("decimal-38", {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0},
     pa.decimal128(38, 0), decimal.Decimal(10**37), decimal.Decimal(10**37)),
    ("uuid", {"type": "string", "logicalType": "uuid"}, pa.string(),
     uuid.UUID("12345678-1234-5678-1234-567812345678"), "12345678-1234-5678-1234-567812345678"),
    ("uuid-fixed", _fixed("uid", 16, logicalType="uuid"), pa.binary(16), b"0123456789abcdef", b"0123456789abcdef"),
    ("date", {"type": "int", "logicalType": "date"}, pa.date32(), dt.date(2024, 2, 29), dt.date(2024, 2, 29)),
    ("time-millis", {"type": "int", "logicalType": "time-millis"}, pa.time32("ms"),
     dt.time(1, 2, 3, 4000), dt.time(1, 2, 3, 4000)),
    ("time-micros", {"type": "long", "logicalType": "time-micros"}, pa.time64("us"),
     dt.time(1, 2, 3, 4), dt.time(1, 2, 3, 4)),
    ("timestamp-millis", {"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("ms", tz="UTC"),
     dt.datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=UTC), dt.datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=UTC)),
    ("timestamp-micros", {"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us", tz="UTC"),
     dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC), dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)),
    ("local-timestamp-millis", {"type": "long", "logicalType": "local-timestamp-millis"}, pa.timestamp("ms"),
     dt.datetime(2024, 1, 2, 3, 4, 5, 123000), dt.datetime(2024, 1, 2, 3, 4, 5, 123000)),
    ("local-timestamp-micros", {"type": "long", "logicalType": "local-timestamp-micros"}, pa.timestamp("us"),
     dt.datetime(2024, 1, 2, 3, 4, 5, 123456), dt.datetime(2024, 1, 2, 3, 4, 5, 123456)),
    # fastavro does not decode the nanosecond logical types and Spark does not map them: their long
    ("timestamp-nanos", {"type": "long", "logicalType": "timestamp-nanos"}, pa.int64(), 10**18, 10**18),
    ("local-timestamp-nanos", {"type": "long", "logicalType": "local-timestamp-nanos"}, pa.int64(), 10**18, 10**18),
    ("duration", _fixed("dur", 12, logicalType="duration"), pa.binary(12), bytes(range(12)), bytes(range(12))),
    ("enum", {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"], "default": "NEW"}, pa.string(),
     "PAID", "PAID"),
    ("fixed", _fixed("hash", 4), pa.binary(4), b"abcd", b"abcd"),
    ("map", {"type": "map", "values": "int"},
     pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.int32(), nullable=False)),
     {"a": 1, "b": 2}, [("a", 1), ("b", 2)]),
    ("map-nullable-values", {"type": "map", "values": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
     pa.map_(pa.field("key", pa.string(), nullable=False), pa.field("value", pa.timestamp("ms", tz="UTC"))),
     {"a": None, "b": dt.datetime(2024, 1, 1, tzinfo=UTC)}, [("a", None), ("b", dt.datetime(2024, 1, 1, tzinfo=UTC))]),
    ("array", {"type": "array", "items": "string"}, pa.list_(pa.field("element", pa.string(), nullable=False)),
     ["x", "y"], ["x", "y"]),
    ("array-nullable-items", {"type": "array", "items": [{"type": "int", "logicalType": "date"}, "null"]},
     pa.list_(pa.field("element", pa.date32())), [dt.date(2024, 1, 1), None], [dt.date(2024, 1, 1), None]),
    ("array-of-uuid", {"type": "array", "items": {"type": "string", "logicalType": "uuid"}},
     pa.list_(pa.field("element", pa.string(), nullable=False)),
     [uuid.UUID(int=1)], [str(uuid.UUID(int=1))]),
    ("nested-record",
     {"type": "record", "name": "Line", "fields": [
         {"name": "sku", "type": "string"},
         {"name": "price", "type": ["null", _fixed("price", 7, logicalType="decimal", precision=15, scale=2)],
          "default": None},
         {"name": "tags", "type": {"type": "map", "values": {"type": "array", "items": "int"}}},
         {"name": "ship", "type": {"type": "record", "name": "Ship", "namespace": "com.example.logistics",
                                   "fields": [{"name": "at", "type": {"type": "long",
                                                                      "logicalType": "timestamp-micros"}},
                                              {"name": "carrier", "type": {"type": "enum", "name": "Carrier",
                                                                           "symbols": ["UPS", "DHL"]}}]}},
         {"name": "qty", "type": "int", "default": 1},
     ]},
     pa.struct([
         pa.field("sku", pa.string(), nullable=False),
         pa.field("price", pa.decimal128(15, 2)),
         pa.field("tags", pa.map_(pa.field("key", pa.string(), nullable=False),
                                  pa.field("value", pa.list_(pa.field("element", pa.int32(), nullable=False)),
                                           nullable=False)), nullable=False),
         pa.field("ship", pa.struct([pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
                                     pa.field("carrier", pa.string(), nullable=False)]), nullable=False),
         pa.field("qty", pa.int32(), nullable=False),
     ]),
     {"sku": "A-1", "price": decimal.Decimal("9.99"), "tags": {"k": [1, 2]},
      "ship": {"at": dt.datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=UTC), "carrier": "DHL"}, "qty": 3},
     {"sku": "A-1", "price": decimal.Decimal("9.99"), "tags": [("k", [1, 2])],
      "ship": {"at": dt.datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=UTC), "carrier": "DHL"}, "qty": 3}),
]

NAMED = {"record", "enum", "fixed"}


def _record(avro_type: Any) -> dict[str, Any]:
    """The case's type as a plain field, then ``[null, T]`` and ``[T, null]`` (by name if named)."""
    if isinstance(avro_type, dict) and avro_type["type"] in NAMED:
        again: Any = avro_type["name"]
    else:
        again = copy.deepcopy(avro_type)
    return {
        "type": "record", "name": "Order", "namespace": NS,
        "fields": [
            {"name": "f", "type": avro_type},
            {"name": "null_first", "type": ["null", again], "default": None},
            {"name": "null_last", "type": [copy.deepcopy(again), "null"]},
        ],
    }


def _block(parsed: Any, records: list[dict[str, Any]]) -> bytes:
    """An Avro data block's content (Hudi layout) holding ``records``."""
    out = io.BytesIO()
    out.write(struct.pack(">ii", AVRO_BLOCK_VERSION, len(records)))
    for rec in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        out.write(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())
    return out.getvalue()


def _files_source_schema(schema: dict[str, Any]) -> pa.Schema:
    """What the Avro files source converts: the writer schema fastavro reads from a file."""
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [])
    buf.seek(0)
    return avro_to_arrow(fastavro.reader(buf).writer_schema)


def _kafka_decode(text: str, records: list[dict[str, Any]]) -> tuple[pa.Schema, pa.RecordBatch]:
    """The Kafka Avro source's path, without Spark: schema as ``AvroDecoder.decode`` builds it,
    Confluent-framed payloads through the ``mapInArrow`` function."""
    value_schema = spark_arrow_schema(_value_schema(text))
    out_schema = pa.schema([*value_schema, pa.field(ERROR_FIELD, pa.string()), *META_FIELDS])
    parsed = fastavro.parse_schema(json.loads(text))
    payloads = []
    for rec in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        payloads.append(confluent_frame(1, buf.getvalue()))
    n = len(payloads)
    raw = pa.RecordBatch.from_pydict(
        {"topic": ["t"] * n, "partition": [0] * n, "offset": list(range(n)),
         "timestamp": [dt.datetime(2024, 1, 1, tzinfo=UTC)] * n, "value": payloads},
        schema=pa.schema(META_FIELDS[:4] + [pa.field("value", pa.binary())]),
    )
    (batch,) = make_decoder(text, {1: text}, "confluent", False, out_schema)(iter([raw]))
    return value_schema, batch


@pytest.mark.parametrize(("avro_type", "arrow_type", "value", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_source_and_table_give_the_same_arrow_type(avro_type, arrow_type, value, expected) -> None:
    schema = _record(avro_type)
    text = json.dumps(schema)
    table = avro_to_arrow(text)
    kafka = _value_schema(text)  # what the Kafka Avro source converts (fastavro-parsed, top level nullable)
    files = _files_source_schema(schema)
    assert table.field("f").type == arrow_type
    assert [f.nullable for f in table] == [False, True, True]
    for f in ("f", "null_first", "null_last"):
        assert kafka.field(f).type == table.field(f).type == files.field(f).type == arrow_type, f
    assert files == table
    assert kafka == pa.schema([f.with_nullable(True) for f in table])
    # Spark can hold what the source hands it (only the representation may differ, never the meaning)
    from pyspark.sql.pandas.types import from_arrow_schema

    from_arrow_schema(spark_arrow_schema(kafka))


@pytest.mark.parametrize(("avro_type", "arrow_type"), [c[1:3] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("null_first", [True, False])
def test_arrow_avro_arrow_round_trip(avro_type, arrow_type, null_first) -> None:
    table = avro_to_arrow(_record(avro_type))
    back = avro_to_arrow(arrow_to_avro(table, "Order", NS, null_first=null_first))
    assert back == table
    # and once more through the Avro JSON a log header / commit metadata stores
    assert avro_to_arrow(json.dumps(arrow_to_avro(back, "Order", NS, null_first=null_first))) == table


@pytest.mark.parametrize(("avro_type", "arrow_type", "value", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_records_convert_the_same_on_both_paths(avro_type, arrow_type, value, expected) -> None:
    schema = _record(avro_type)
    text = json.dumps(schema)
    parsed = fastavro.parse_schema(json.loads(text))
    records = [{"f": value, "null_first": value, "null_last": None},
               {"f": value, "null_first": None, "null_last": value}]
    # table format: an Avro log block decoded, then written back byte for byte
    content = _block(parsed, records)
    table = decode_avro_records(content, json.loads(text), None, "test")
    assert table.schema == avro_to_arrow(text)
    assert table.to_pylist() == [{"f": expected, "null_first": expected, "null_last": None},
                                 {"f": expected, "null_first": None, "null_last": expected}]
    assert encode_avro_records(table, json.loads(text)) == content
    # the one record conversion called directly on fastavro's records
    assert avro_records_to_arrow(list(fastavro.reader(io.BytesIO(_container(schema, records)))),
                                 table.schema).equals(table)
    # Kafka Avro source: the same values, in the types Spark carries
    spark_schema, batch = _kafka_decode(text, records)
    assert batch.column(ERROR_FIELD).null_count == 2
    values = pa.Table.from_batches([batch.select(spark_schema.names)])
    assert values.schema == spark_schema
    assert values.equals(table.cast(spark_schema))
    if spark_schema.field("f").type == arrow_type:
        assert values.column("f").to_pylist() == [expected, expected]


def _container(schema: dict[str, Any], records: list[dict[str, Any]]) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, schema, records)
    return buf.getvalue()


def test_spark_representation_is_spark_avro_readers() -> None:
    """Where Spark has no such Arrow type, the source gives Spark what Spark's Avro reader gives."""
    t = avro_to_arrow(_record({"type": "record", "name": "S", "fields": [
        {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
        {"name": "fx", "type": {"type": "array", "items": _fixed("fx", 3)}},
    ]}))
    s = spark_arrow_schema(t).field("f").type
    assert [s.field(i).type for i in range(s.num_fields)] == [
        pa.int32(), pa.int64(), pa.timestamp("us", tz="UTC"), pa.timestamp("us"),
        pa.list_(pa.field("element", pa.binary(), nullable=False)),
    ]
    wide = avro_to_arrow(_record({"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}))
    assert wide.field("f").type == pa.decimal256(40, 2) == _value_schema(json.dumps(_record(
        {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}))).field("f").type
    with pytest.raises(SchemaError, match="38"):
        spark_arrow_schema(wide)


def test_named_types_and_namespaces_resolve_alike() -> None:
    schema = {
        "type": "record", "name": "Order", "namespace": NS,
        "fields": [
            {"name": "a", "type": {"type": "record", "name": "Addr", "fields": [
                {"name": "zip", "type": _fixed("Zip", 5)},
                {"name": "kind", "type": {"type": "enum", "name": "Kind", "namespace": "other", "symbols": ["X"]}},
            ]}},
            {"name": "b", "type": ["null", "Addr"]},                 # short name, enclosing namespace
            {"name": "c", "type": [f"{NS}.Addr", "null"]},           # full name
            {"name": "z", "type": "Zip"},                            # a fixed defined inside Addr
            {"name": "k", "type": {"type": "array", "items": "other.Kind"}},
        ],
    }
    text = json.dumps(schema)
    table = avro_to_arrow(text)
    addr = pa.struct([pa.field("zip", pa.binary(5), nullable=False), pa.field("kind", pa.string(), nullable=False)])
    assert [(f.name, f.type, f.nullable) for f in table] == [
        ("a", addr, False), ("b", addr, True), ("c", addr, True), ("z", pa.binary(5), False),
        ("k", pa.list_(pa.field("element", pa.string(), nullable=False)), False),
    ]
    assert _value_schema(text) == pa.schema([f.with_nullable(True) for f in table])
    assert _files_source_schema(schema) == table


@pytest.mark.parametrize("union", [["int", "string"], ["null", "int", "string"], ["null"], ["int", "long"]])
def test_unions_of_several_types_are_refused_alike(union) -> None:
    text = json.dumps({"type": "record", "name": "R", "fields": [{"name": "u", "type": union}]})
    with pytest.raises(SchemaError, match="'u'"):
        avro_to_arrow(text)
    with pytest.raises(SchemaError, match="'u'"):
        _value_schema(text)


def test_recursive_types_are_refused() -> None:
    schema = {"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(SchemaError, match="recursive"):
        avro_to_arrow(schema)
    with pytest.raises(SchemaError, match="recursive"):
        _value_schema(json.dumps(schema))


def test_defaults_do_not_change_types() -> None:
    plain = {"type": "record", "name": "R", "fields": [{"name": "n", "type": ["null", "long"]},
                                                     {"name": "s", "type": "string"}]}
    with_defaults = {"type": "record", "name": "R", "fields": [{"name": "n", "type": ["null", "long"], "default": None},
                                                             {"name": "s", "type": "string", "default": "x"}]}
    assert avro_to_arrow(plain) == avro_to_arrow(with_defaults)
    assert _value_schema(json.dumps(with_defaults)) == pa.schema([f.with_nullable(True) for f in avro_to_arrow(plain)])


def test_null_type_is_the_same_on_both_paths() -> None:
    text = json.dumps({"type": "record", "name": "R", "fields": [{"name": "nothing", "type": "null"}]})
    assert avro_to_arrow(text).field("nothing").type == _value_schema(text).field("nothing").type == pa.null()
    assert avro_to_arrow(text).field("nothing").nullable

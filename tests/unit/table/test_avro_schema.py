"""Avro <-> Arrow schemas named exactly as Hudi/Spark name them (checked on fixture schemas)."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest

from streamer.errors import SchemaError
from streamer.table.avro_schema import (
    arrow_to_avro,
    avro_records_to_arrow,
    avro_to_arrow,
    min_bytes_for_precision,
)


def _create_schema(table_dir) -> str:
    for line in (table_dir / ".hoodie" / "hoodie.properties").read_text().splitlines():
        if line.startswith("hoodie.table.create.schema="):
            return line.split("=", 1)[1].replace("\\:", ":").replace("\\=", "=")
    raise AssertionError("no create schema")


@pytest.mark.conformance
@pytest.mark.parametrize(
    "name",
    ["sample_table__mor__parquet__v6_nonpartitioned", "sample_table__cow__v6_complexkeygen_hivestyle",
     "quickstart_trips_table__mor__avro__v6_trips_8i1u", "sample_table__mor__avro__v9_txns_simple_nometa"],
)
def test_create_schema_roundtrips_exactly(hudi_fixtures_dir, name) -> None:
    from tests.support.fixture_tables import fixture_table_path

    text = _create_schema(fixture_table_path(hudi_fixtures_dir, name))
    d = json.loads(text)
    back = arrow_to_avro(avro_to_arrow(text), d["name"], d["namespace"], null_first=False)
    assert json.dumps(back, separators=(",", ":")) == text


def test_types_follow_spark_conventions() -> None:
    s = avro_to_arrow(
        {
            "type": "record", "name": "r", "namespace": "hoodie.t",
            "fields": [
                {"name": "d", "type": ["null", {"type": "fixed", "name": "fixed", "namespace": "hoodie.t.r.d",
                                                "size": 5, "logicalType": "decimal", "precision": 10, "scale": 5}]},
                {"name": "day", "type": {"type": "int", "logicalType": "date"}},
                {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
                {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
                {"name": "m", "type": {"type": "map", "values": ["null", "long"]}},
                {"name": "a", "type": {"type": "array", "items": "string"}},
            ],
        }
    )
    assert s.field("d").type == pa.decimal128(10, 5) and s.field("d").nullable
    assert s.field("day").type == pa.date32() and not s.field("day").nullable
    assert s.field("ts").type == pa.timestamp("us", tz="UTC")
    assert s.field("lts").type == pa.timestamp("ms")
    assert s.field("m").type.item_field.nullable
    assert not s.field("a").type.value_field.nullable


def test_arrow_to_avro_names_nested_records_like_spark() -> None:
    inner = pa.struct([pa.field("c", pa.struct([pa.field("x", pa.float64())]))])
    s = pa.schema([pa.field("s", inner), pa.field("price", pa.decimal128(15, 2)), pa.field("b", pa.int8())])
    av = arrow_to_avro(s, "t_record", "hoodie.t")
    srec = av["fields"][0]["type"][1]
    assert (srec["name"], srec["namespace"]) == ("s", "hoodie.t.t_record")
    crec = srec["fields"][0]["type"][1]
    assert (crec["name"], crec["namespace"]) == ("c", "hoodie.t.t_record.s")
    fixed = av["fields"][1]["type"][1]
    assert fixed == {"type": "fixed", "name": "fixed", "namespace": "hoodie.t.t_record.price", "size": 7,
                     "logicalType": "decimal", "precision": 15, "scale": 2}
    assert av["fields"][2]["type"] == ["null", "int"] and av["fields"][2]["default"] is None


def test_min_bytes_for_precision() -> None:
    assert [min_bytes_for_precision(p) for p in (1, 2, 9, 10, 15, 18, 38)] == [1, 1, 4, 5, 7, 8, 16]


def test_records_to_arrow_values() -> None:
    schema = pa.schema([
        pa.field("amount", pa.decimal128(15, 2)), pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("m", pa.map_(pa.string(), pa.int64())),
        pa.field("s", pa.struct([pa.field("mm", pa.map_(pa.string(), pa.string()))])),
    ])
    recs = [{"amount": decimal.Decimal("8900.00"), "ts": dt.datetime(2024, 1, 16, 8, 15, tzinfo=dt.timezone.utc),
             "m": {"a": 1}, "s": {"mm": {"k": "v"}}}, {"amount": None, "ts": None, "m": None, "s": None}]
    t = avro_records_to_arrow(recs, schema)
    row = t.to_pylist()[0]
    assert str(row["amount"]) == "8900.00" and str(row["ts"]) == "2024-01-16 08:15:00+00:00"
    assert row["m"] == [("a", 1)] and row["s"] == {"mm": [("k", "v")]}
    with pytest.raises(SchemaError, match="amount"):
        avro_records_to_arrow([{"amount": "nope"}], schema)


def test_unsupported_union_names_the_field() -> None:
    with pytest.raises(SchemaError, match="u"):
        avro_to_arrow({"type": "record", "name": "r", "fields": [{"name": "u", "type": ["int", "string"]}]})

"""Avro schemas → Arrow schemas, and decoding Avro bodies into Arrow record batches.

Shared by the Kafka Avro source and the Avro files source. Decoding uses fastavro
(on executors, inside ``mapInArrow``), so no Spark Avro package is needed.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from streamer.errors import SchemaError
from streamer.table.avro_schema import has_nested_map, maps_to_pairs

_PRIMITIVES: dict[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


def parse_avro_schema(schema: str | dict[str, Any] | list[Any]) -> Any:
    """Parse (and normalise) an Avro schema given as JSON text or an already-loaded object."""
    import fastavro

    if isinstance(schema, str):
        schema = json.loads(schema)
    return fastavro.parse_schema(schema)


def avro_to_arrow_schema(schema: Any) -> pa.Schema:
    """Arrow schema of a *record* Avro schema (nullable unions become nullable fields)."""
    parsed = parse_avro_schema(schema) if isinstance(schema, str) else schema
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise SchemaError("an Avro value schema must be a record")
    t = _type(parsed, parsed.get("name", "record"))
    return pa.schema(list(t))


def _field(f: dict[str, Any]) -> pa.Field:
    t, nullable = _nullable(f["type"], f["name"])
    return pa.field(f["name"], t, nullable=nullable)


def _nullable(t: Any, where: str) -> tuple[pa.DataType, bool]:
    if isinstance(t, list):
        non_null = [x for x in t if x != "null"]
        if len(non_null) != 1:
            raise SchemaError(f"Avro field {where!r}: only unions of null and one type are supported, got {t}")
        return _type(non_null[0], where), len(non_null) != len(t)
    return _type(t, where), False


def _type(t: Any, where: str) -> pa.DataType:
    if isinstance(t, str):
        if t in _PRIMITIVES:
            return _PRIMITIVES[t]
        raise SchemaError(f"Avro field {where!r}: unsupported type {t!r}")
    if isinstance(t, list):
        return _nullable(t, where)[0]
    logical = t.get("logicalType")
    base = t.get("type")
    if logical == "date" and base == "int":
        return pa.date32()
    if logical in ("timestamp-millis", "timestamp-micros") and base == "long":
        return pa.timestamp("us", tz="UTC")
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and base == "long":
        return pa.timestamp("us")
    if logical == "decimal" and base in ("bytes", "fixed"):
        return pa.decimal128(int(t["precision"]), int(t.get("scale", 0)))
    if logical == "uuid" and base == "string":
        return pa.string()
    if base == "record":
        return pa.struct([_field(f) for f in t["fields"]])
    if base == "array":
        return pa.list_(_type(t["items"], where))
    if base == "map":
        return pa.map_(pa.string(), _type(t["values"], where))
    if base == "enum":
        return pa.string()
    if base == "fixed":
        return pa.binary()
    if isinstance(base, str | list | dict):
        return _type(base, where)
    raise SchemaError(f"Avro field {where!r}: unsupported type {t!r}")


def records_to_arrow(records: list[dict[str, Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Decoded Avro records (fastavro dicts) → one record batch of ``schema``."""
    # pyarrow wants map values as lists of (key, value) pairs, fastavro gives dicts.
    if any(has_nested_map(f.type) for f in schema):
        records = [{f.name: maps_to_pairs(r.get(f.name), f.type) for f in schema} for r in records]
    return pa.RecordBatch.from_pylist(records, schema=schema)

"""Hive column types and Spark's schema JSON, from the table's Arrow schema.

Why two renderings: Hive, Trino and Spark's Hive path read the metastore's column types
(``bigint``, ``struct<a:int>``); Spark's data-source path reads the table parameter
``spark.sql.sources.schema.part.N`` instead - a ``StructType`` JSON - and Hudi's Hive
sync writes both. Types follow Hudi's ``HiveSchemaUtil`` (Parquet to Hive) and
``Parquet2SparkSchemaUtils`` (Parquet to Spark) for the Parquet types our writer
produces: timestamps are ``bigint`` for Hive unless ``support_timestamp`` is set (Hudi's
``hoodie.datasource.hive_sync.support_timestamp``, default false) and ``timestamp`` for
Spark; small integers are Parquet INT32 and so Hive ``int``.
"""

from __future__ import annotations

import json

import pyarrow as pa

from streamer.errors import ConfigError
from streamer.table.avro_schema import primitive_name


def _scalar(t: pa.DataType) -> str | None:
    """The kind of a scalar Arrow type, as both catalogs name it apart from spelling
    (``None``: a nested type, or one neither has)."""
    primitive = primitive_name(t)
    if primitive is not None:
        return primitive
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp"
    return None


#: Where Hive and Spark spell a scalar kind differently.
_HIVE_NAMES = {"long": "bigint"}
_SPARK_NAMES = {"int": "integer"}


def hive_type(t: pa.DataType, support_timestamp: bool = False) -> str:
    """The Hive type name of an Arrow type (lower case, as Hive prints them)."""
    kind = _scalar(t)
    if kind == "timestamp" and not support_timestamp:
        return "bigint"
    if kind is not None:
        return _HIVE_NAMES.get(kind, kind)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return f"array<{hive_type(t.value_type, support_timestamp)}>"
    if pa.types.is_map(t):
        return f"map<{hive_type(t.key_type, support_timestamp)},{hive_type(t.item_type, support_timestamp)}>"
    if pa.types.is_struct(t):
        inner = ",".join(f"{f.name}:{hive_type(f.type, support_timestamp)}" for f in t)
        return f"struct<{inner}>"
    raise ConfigError(f"catalog sync: no Hive type for Arrow type {t}")


def _spark_type(t: pa.DataType) -> object:
    kind = _scalar(t)
    if kind is not None:
        return _SPARK_NAMES.get(kind, kind)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return {"type": "array", "elementType": _spark_type(t.value_type), "containsNull": True}
    if pa.types.is_map(t):
        return {"type": "map", "keyType": _spark_type(t.key_type), "valueType": _spark_type(t.item_type),
                "valueContainsNull": True}
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [_spark_field(f, {}) for f in t]}
    raise ConfigError(f"catalog sync: no Spark type for Arrow type {t}")


def _spark_field(f: pa.Field, metadata: dict[str, str]) -> dict[str, object]:
    return {"name": f.name, "type": _spark_type(f.type), "nullable": True, "metadata": metadata}


def spark_schema_json(schema: pa.Schema, partition_fields: list[str],
                      field_metadata: dict[str, str] | None = None) -> str:
    """Spark's ``StructType`` JSON of the table, partition columns last (as Spark keeps a
    partitioned data source table's schema, and as Hudi's sync writes it).

    ``field_metadata`` goes on every top-level field (see :mod:`streamer.catalog.hudi_layout`
    for the one entry we add: where our Python data source finds the table).
    """
    meta = dict(field_metadata or {})
    data = [f for f in schema if f.name not in partition_fields]
    parts = [schema.field(p) if p in schema.names else pa.field(p, pa.string()) for p in partition_fields]
    doc = {"type": "struct", "fields": [_spark_field(f, meta) for f in data + parts]}
    return json.dumps(doc, separators=(",", ":"))


def hive_columns(schema: pa.Schema, partition_fields: list[str],
                 support_timestamp: bool = False) -> list[tuple[str, str]]:
    """``(name, type)`` of the data columns: every field but the partition columns, which
    Hive keeps apart (a name in both is refused by the metastore)."""
    return [(f.name, hive_type(f.type, support_timestamp)) for f in schema if f.name not in partition_fields]


def partition_columns(schema: pa.Schema, partition_fields: list[str], typed: bool = True,
                      support_timestamp: bool = False) -> list[tuple[str, str]]:
    """``(name, type)`` of the partition columns: the field's Hive type when the schema has
    it (Hudi's ``getPartitionKeyType``), else ``string``; ``typed=False`` gives ``string``
    throughout (a path that is not the field's value, e.g. a formatted timestamp)."""
    out = []
    for p in partition_fields:
        if typed and p in schema.names:
            out.append((p, hive_type(schema.field(p).type, support_timestamp)))
        else:
            out.append((p, "string"))
    return out

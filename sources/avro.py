"""What the Avro sources (Kafka Avro, Avro files) add to the one Avro <-> Arrow converter.

The Avro -> Arrow mapping and the conversion of decoded records live in
:mod:`streamer.table.avro_schema` (the table format uses the same one, so an Avro type
gives the same Arrow type in a source and in a table). This module only parses schema
text (a registry's or an ``.avsc``) and hands Arrow data to Spark: Spark's ``mapInArrow``
carries a smaller set of Arrow types, so :func:`spark_arrow_schema` maps the others the
way Spark's own Avro reader (``SchemaConverters``) represents them. Decoding uses fastavro
(on executors, inside ``mapInArrow``), so no Spark Avro package is needed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from streamer.errors import SchemaError
from streamer.table.avro_schema import avro_records_to_arrow


def parse_avro_schema(schema: str | dict[str, Any] | list[Any]) -> Any:
    """Parse (and normalise) an Avro schema given as JSON text or an already-loaded object."""
    import fastavro

    if isinstance(schema, str):
        schema = json.loads(schema)
    return fastavro.parse_schema(schema)


def spark_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` in the Arrow types Spark's ``mapInArrow`` accepts, as Spark's Avro reader has them.

    Spark timestamps are microseconds (``timestamp-millis`` is a ``TimestampType`` too), Spark
    has no time type for Avro (``time-millis``/``time-micros`` are ``int``/``long``), and binary
    is not fixed-size. Decimals past 38 digits have no Spark type and are refused.
    """
    return pa.schema([f.with_type(_spark_type(f.type, f.name)) for f in schema])


def _spark_type(t: pa.DataType, where: str) -> pa.DataType:
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz=t.tz)
    if pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_time64(t):
        return pa.int64()
    if pa.types.is_fixed_size_binary(t) and not pa.types.is_decimal(t):
        return pa.binary()
    if pa.types.is_decimal256(t):
        raise SchemaError(f"Avro field {where!r}: decimal({t.precision}, {t.scale}) exceeds Spark's 38 digits")
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_spark_type(t.field(i).type, f"{where}.{t.field(i).name}"))
                          for i in range(t.num_fields)])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_spark_type(t.value_type, f"{where}.element")))
    if pa.types.is_map(t):
        return pa.map_(t.key_field, t.item_field.with_type(_spark_type(t.item_type, f"{where}.value")))
    return t


def records_to_spark_batch(
    records: Iterable[Mapping[str, Any]], schema: pa.Schema, spark_schema: pa.Schema,
) -> pa.RecordBatch:
    """Decoded Avro records (fastavro dicts) of Arrow ``schema`` -> one batch of ``spark_schema``
    (:func:`spark_arrow_schema` of it)."""
    table = avro_records_to_arrow(records, schema)
    if not table.schema.equals(spark_schema):
        table = table.cast(spark_schema)
    return pa.RecordBatch.from_arrays([c.combine_chunks() for c in table.columns], schema=spark_schema)

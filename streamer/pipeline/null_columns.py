"""A column a batch holds no value in is written in the table's type.

Why: a JSON source types each batch's columns from its values, and Spark's inference types
a field that is null in every record as a string. A batch in which a nullable ``int``
column happens to be null throughout would then look like a type change and stop the
pipeline: a batch of Debezium deletes (whose ``before`` carries the primary key alone),
or any batch of a sparse column. A column without a value carries no type; written as
nulls of the table's type it says exactly what the batch says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from streamer.data import arrow_schema, is_spark_dataframe
from streamer.errors import SchemaError
from streamer.write.schema import reconcile


def typed_like_table(data: Any, table_schema: Callable[[], pa.Schema | None]) -> Any:
    """``data`` (Arrow or a Spark DataFrame) with each column whose type the table would
    refuse, and which is null in every row, as nulls of the table's type.

    ``table_schema`` is asked only when it can matter (for Arrow: some column is all null),
    so an ordinary batch costs no read of the table's state."""
    if isinstance(data, pa.Table) and not any(c.null_count == len(c) for c in data.columns):
        return data
    schema = table_schema()
    if schema is None:
        return data
    clashing = _clashing(arrow_schema(data), schema)
    if not clashing:
        return data
    if is_spark_dataframe(data):
        return _spark(data, clashing)
    table: pa.Table = data
    for name, wanted in clashing.items():
        column = table.column(name)
        if column.null_count == len(column):
            table = table.set_column(table.schema.get_field_index(name), pa.field(name, wanted),
                                     pa.nulls(len(column), wanted))
    return table


def _clashing(incoming: pa.Schema, table_schema: pa.Schema) -> dict[str, pa.DataType]:
    """The batch's columns whose type the table refuses, with the table's type."""
    out: dict[str, pa.DataType] = {}
    for field in incoming:
        index = table_schema.get_field_index(field.name)
        if index < 0:
            continue
        stored = table_schema.field(index)
        try:
            reconcile(pa.schema([stored]), pa.schema([field]), ())
        except SchemaError:
            out[field.name] = stored.type
    return out


def _spark(df: Any, clashing: dict[str, pa.DataType]) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type

    counts = df.select([F.count(F.col(f"`{name}`")).alias(name) for name in clashing]).first()
    for name, wanted in clashing.items():
        if counts is not None and counts[name] == 0:
            df = df.withColumn(name, F.lit(None).cast(from_arrow_type(wanted)))
    return df

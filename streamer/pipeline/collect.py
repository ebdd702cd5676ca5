"""Several small Spark results in one job: one ``toArrow`` of their union, split on the driver.

Why: on a small machine each Spark job costs a fixed scheduling and collect overhead
whatever its size, and a micro-batch's freshness is the sum of its jobs. The error rows
of a source, the transformed rows and the count of the records before the transforms
all come from one cached decode; collected as three jobs they paid that overhead three
times. Here each frame becomes one struct column of a union (the other columns null in
its rows), so one job collects them all and the rows keep their exact Arrow types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def collect_together(*frames: DataFrame) -> list[pa.Table]:
    """``[f.toArrow() for f in frames]``, in one Spark job (same rows, columns and types)."""
    from pyspark.sql import functions as F

    if len(frames) == 1:
        return [frames[0].toArrow()]
    names = [f"_part{i}" for i in range(len(frames))]
    # every field nullable inside the union, nested ones too (a frame's rows are null in
    # the other columns, and so are the fields of their structs: Arrow refuses a null under
    # a non-nullable field), the top level's restored after the split
    schemas = [f.schema for f in frames]
    relaxed = [_relaxed(s) for s in schemas]
    union = None
    for i, frame in enumerate(frames):
        columns = [
            (F.struct(*[F.col(_quoted(c)) for c in frame.columns]).cast(relaxed[j]) if j == i
             else F.lit(None).cast(relaxed[j])).alias(names[j])
            for j in range(len(frames))
        ]
        part = frame.select(*columns)
        union = part if union is None else union.unionByName(part)
    assert union is not None
    rows = union.toArrow()
    return [_unnest(rows.column(name), schema) for name, schema in zip(names, schemas, strict=True)]


def set_rows(column: pa.ChunkedArray) -> pa.Table:
    """The rows where the struct ``column`` is set (not null), its fields as columns."""
    present = column.filter(pc.is_valid(column))
    if present.num_chunks == 0:
        return pa.schema(list(column.type)).empty_table()
    return pa.Table.from_struct_array(present)


def _relaxed(schema: StructType) -> StructType:
    """``schema`` with every field nullable, at every depth (Debezium's ``transaction``
    block is a nullable struct of non-nullable fields, null in most rows)."""
    from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

    def relax(t: DataType) -> DataType:
        if isinstance(t, StructType):
            return StructType([StructField(f.name, relax(f.dataType), True, f.metadata) for f in t.fields])
        if isinstance(t, ArrayType):
            return ArrayType(relax(t.elementType), True)
        if isinstance(t, MapType):
            return MapType(t.keyType, relax(t.valueType), True)
        return t

    relaxed = relax(schema)
    assert isinstance(relaxed, StructType)
    return relaxed


def _unnest(column: pa.ChunkedArray, schema: StructType) -> pa.Table:
    """:func:`set_rows`, with the nullability of the frame's own columns (``schema``, a
    Spark ``StructType``)."""
    table = set_rows(column)
    fields = [f.with_nullable(s.nullable) for f, s in zip(table.schema, schema.fields, strict=True)]
    return table.cast(pa.schema(fields))

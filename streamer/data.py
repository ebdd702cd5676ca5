"""What the writer accepts as a batch, decided in one place.

A batch is either a Spark DataFrame (classic or Spark Connect) or anything Arrow takes
(``pyarrow.Table``, ``RecordBatch``, a dict of columns...). Every component that must
tell them apart asks here, instead of probing attributes on ``data: Any``.
"""

from __future__ import annotations

import sys
from typing import Any

import pyarrow as pa


def is_spark_dataframe(data: Any) -> bool:
    """True for a PySpark DataFrame (never imports pyspark: no pyspark, no DataFrame)."""
    if isinstance(data, pa.Table | pa.RecordBatch):
        return False
    sql = sys.modules.get("pyspark.sql")
    if sql is None:
        return False
    if isinstance(data, sql.DataFrame):
        return True
    connect = sys.modules.get("pyspark.sql.connect.dataframe")
    return connect is not None and isinstance(data, connect.DataFrame)


def arrow_schema(data: Any) -> pa.Schema:
    """The Arrow schema of a batch, without collecting a Spark DataFrame."""
    if isinstance(data, pa.Table | pa.RecordBatch):
        return data.schema
    if is_spark_dataframe(data):
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(data.schema)
    return pa.table(data).schema


def to_arrow(data: Any) -> pa.Table:
    """The batch as one Arrow table (a Spark DataFrame is collected to the driver)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if is_spark_dataframe(data):
        return data.toArrow()
    return pa.table(data)

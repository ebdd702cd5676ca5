"""What the writer accepts as a batch, decided in one place.

A batch is either a Spark DataFrame (classic or Spark Connect) or anything Arrow takes
(``pyarrow.Table``, ``RecordBatch``, a dict of columns...). Every component that must
tell them apart asks here, instead of probing attributes on ``data: Any``. And how a
batch's rows are split by a column's values (its partitions), which the index and the
planner both do.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


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


def dictionary_encoded(arr: pa.Array) -> pa.DictionaryArray:
    """``arr`` as a dictionary array (as it is when it is one)."""
    return arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)


def rows_by_value(values: pa.Array | pa.ChunkedArray) -> list[tuple[object, np.ndarray]]:
    """Each distinct value of ``values`` (nulls last) with its row numbers, ascending.

    One dictionary encoding (a hash of each value), then integer comparisons: comparing
    a million partition paths with each of 8 partitions as strings cost ~4x as much.
    """
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if len(arr) == 0:
        return []
    enc = dictionary_encoded(arr)
    codes = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False)
    names = enc.dictionary.to_pylist()
    nulls = codes < 0
    present = np.flatnonzero(np.bincount(codes[~nulls] if nulls.any() else codes, minlength=len(names)))
    out: list[tuple[object, np.ndarray]] = [(names[int(c)], np.flatnonzero(codes == c)) for c in present]
    if nulls.any():
        out.append((None, np.flatnonzero(nulls)))
    return out

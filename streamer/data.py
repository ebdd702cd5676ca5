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


def short_keys(keys: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """Each string key as one uint64 that orders and compares as the string does, or None
    when a key does not fit.

    A key of at most 8 UTF-8 bytes, none of them NUL, read big-endian and zero-padded on
    the right: Arrow orders strings by their bytes, a shorter string first when it is the
    other's prefix, and the padding's zeros sort below every byte such a key holds, so the
    integers sort as the strings do and are equal exactly when the strings are. Record keys
    of integer ids below 10^8 are such keys; sorting and matching integers costs a fraction
    of sorting and hashing strings (benchmarks/RESULTS.md, "Large batches"). None for any
    longer key, a NUL byte, a null, or a column that is not ``string``.
    """
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not pa.types.is_string(keys.type) or keys.null_count:
        return None
    if len(keys) == 0:
        return np.empty(0, dtype=np.uint64)
    packed = packed_bytes(keys)
    return None if packed is None or packed[2] else packed[0]


def packed_bytes(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """The values of a non-empty ``string`` or ``binary`` array without nulls, each of 1
    to 8 bytes, as big-endian uint64 zero-padded on the right, with their byte lengths and
    whether any holds a NUL byte; None when a value is empty or longer (see :func:`short_keys`)."""
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    lengths = np.diff(offsets)
    if int(lengths.max()) > 8 or int(lengths.min()) == 0:
        return None
    first, end = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8)[first:end]
    padded = np.zeros(end - first + 8, dtype=np.uint8)
    padded[: end - first] = data
    words = np.ndarray(shape=(end - first + 1,), dtype=">u8", buffer=padded, strides=(1,))
    shift = ((8 - lengths) * 8).astype(np.uint64)
    out = words[offsets[:-1] - first].astype(np.uint64)
    return (out >> shift) << shift, lengths, not data.all()


def key_order(keys: pa.Array | pa.ChunkedArray | np.ndarray) -> np.ndarray:
    """The positions of ``keys`` in ascending order, ties in input order (a stable sort).

    ``keys``: Arrow strings, or the same keys as :func:`short_keys` integers, whose sort
    costs a sixth: unstable, and done again stably only if two keys are equal."""
    if not isinstance(keys, np.ndarray):
        return pc.sort_indices(keys).to_numpy()
    order = np.argsort(keys)
    ranked = keys[order]
    if len(ranked) > 1 and (ranked[1:] == ranked[:-1]).any():
        order = np.argsort(keys, kind="stable")
    return order


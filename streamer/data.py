"""What the writer accepts as a batch, decided in one place.

A batch is either a Spark DataFrame (classic or Spark Connect) or anything Arrow takes
(``pyarrow.Table``, ``RecordBatch``, a dict of columns...). Every component that must
tell them apart asks here, instead of probing attributes on ``data: Any``. And how a
batch's rows are split by a column's values (its partitions), which the index and the
planner both do; and the arrays the writer builds per row (short keys, numbered strings).
"""

from __future__ import annotations

import sys
import threading
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
    names = enc.dictionary.to_pylist()
    codes = pc.fill_null(enc.indices.cast(pa.int32()), len(names)).to_numpy(zero_copy_only=False)  # nulls last
    counts = np.bincount(codes, minlength=len(names) + 1)
    order = stable_order(codes, len(names) + 1)
    ends = np.cumsum(counts)
    return [(names[c] if c < len(names) else None, order[ends[c] - counts[c]: ends[c]])
            for c in np.flatnonzero(counts).tolist()]


def stable_order(codes: np.ndarray, bound: int) -> np.ndarray:
    """``np.argsort(codes, kind="stable")`` for codes in ``[0, bound)``, as the smallest
    unsigned type that holds them: numpy sorts 8- and 16-bit integers stably by radix,
    in a pass or two (a million int32 task ids: 34 ms as int32, 3-5 ms so)."""
    if bound <= 1 << 8:
        codes = codes.astype(np.uint8, copy=False)
    elif bound <= 1 << 16:
        codes = codes.astype(np.uint16, copy=False)
    return np.argsort(codes, kind="stable")


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



# -- numbered strings ---------------------------------------------------------------------------
#: Per digit count k, the decimal digits of every k-digit number (k = 1: 0..9), each as one
#: little-endian uint64 whose first byte is the leading digit: made once per process,
#: extended when a larger count is asked for (see :func:`numbered_strings`).
_DIGIT_WORDS: list[np.ndarray] = []
_DIGITS_LOCK = threading.Lock()


def _digit_words(k: int) -> np.ndarray:
    """The digit words of the k-digit numbers (``k <= 8``), from those of k-1 digits: a
    number ``10 q + r`` is ``q``'s digits, then ``r``'s (three array passes per number)."""
    with _DIGITS_LOCK:
        while len(_DIGIT_WORDS) < k:
            j = len(_DIGIT_WORDS)  # building the words of j + 1 digits
            last = np.arange(10, dtype=np.uint64) + np.uint64(48)
            if j == 0:
                _DIGIT_WORDS.append(last)
                continue
            prev = _DIGIT_WORDS[j - 1][1:] if j == 1 else _DIGIT_WORDS[j - 1]  # no leading 0
            shifted = np.tile(last << np.uint64(8 * j), len(prev))
            _DIGIT_WORDS.append(np.repeat(prev, 10) | shifted)
        return _DIGIT_WORDS[k - 1]


def numbered_strings(prefix: str, n: int) -> pa.Array:
    """``[f"{prefix}{i}" for i in range(n)]`` as an Arrow ``string`` array, built in bytes.

    Why: Hudi's ``_hoodie_commit_seqno`` is ``<instant>_<task>_<row>`` for every row written;
    casting a million row numbers to strings and joining them to the prefix cost ~4% of a
    1M-row upsert (benchmarks/RESULTS.md, "Large batches"). Here each run of equal-length
    strings is written as rows of a byte matrix: every row's digits as one 8-byte word (its
    spill into the next row is overwritten by that row's prefix, written after), then the
    prefix in words of 8, 4, 2 and 1 bytes. Numbers of more than 8 digits fall back to Arrow.
    """
    head = np.frombuffer(prefix.encode("utf-8"), dtype=np.uint8)
    lp = len(head)
    counts = [max(0, min(n, 10**k) - (0 if k == 1 else 10 ** (k - 1))) for k in range(1, 9)]
    widths = [lp + k for k in range(1, 9)]
    total = sum(c * w for c, w in zip(counts, widths, strict=True))
    if n > 10**8 or total >= 1 << 31:  # past 8 digits, or more bytes than int32 offsets reach
        seq = pa.array(np.arange(n, dtype=np.int64)).cast(pa.string())
        return pc.binary_join_element_wise(prefix, seq, "")
    buf = np.empty(total + 8, dtype=np.uint8)  # every byte is written; + 8: the last digit word spills
    offsets = np.empty(n + 1, dtype=np.int32)
    offsets[0] = 0
    start = row = 0
    for k, (cnt, width) in enumerate(zip(counts, widths, strict=True), start=1):
        if cnt == 0:
            break
        digits = np.ndarray((cnt,), dtype="<u8", buffer=buf, offset=start + lp, strides=(width,))
        digits[:] = _digit_words(k)[:cnt]
        at = 0
        for size, dtype in ((8, "<u8"), (4, "<u4"), (2, "<u2"), (1, "u1")):
            while lp - at >= size:
                word = head[at : at + size].view(dtype)[0]
                np.ndarray((cnt,), dtype=dtype, buffer=buf, offset=start + at, strides=(width,))[:] = word
                at += size
        offsets[row + 1 : row + cnt + 1] = start + width * np.arange(1, cnt + 1, dtype=np.int64)
        start += cnt * width
        row += cnt
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(buf[:total])])

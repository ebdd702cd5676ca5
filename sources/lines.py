"""Split text files into lines with their numbers and original bytes, on the executors.

Why not Spark's own JSON/CSV readers: they lose what the error table needs. They give
no line numbers (two identical bad lines of a file got one error id), they decode bytes
before we can look at them (a non-UTF-8 byte surfaced later as a ``UnicodeDecodeError``
while computing the error id), and a record of 50 MB is parsed whole. Here a file is
read as bytes in chunks and cut at ``\\n`` with numpy (no Python loop per line); each
line keeps its 1-based number and its exact bytes (a ``\\r`` before the ``\\n`` and a
UTF-8 byte-order mark at the start of the file are not part of the record). A line
longer than ``limit`` bytes is not carried whole: only its first ``keep`` bytes and its
true size go on, so one huge record costs neither memory nor a Spark row of its size.
Parsing stays in Spark (``from_json``/``from_csv``), vectorised in the JVM.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import numpy as np
import pyarrow as pa

#: Columns of the line frame: file URI, 1-based line number, bytes (cut at ``keep`` when
#: the line is over the limit), true size of the line in bytes.
LINE_SCHEMA = pa.schema(
    [("_source_file", pa.string()), ("_line", pa.int64()), ("_raw", pa.binary()), ("_size", pa.int64())]
)
LINE_DDL = "_source_file STRING, _line BIGINT, _raw BINARY, _size BIGINT"
_BOM = b"\xef\xbb\xbf"
_NL, _CR = 10, 13


def split_lines(
    stream: BinaryIO, file: str, limit: int, keep: int, chunk_bytes: int = 8 << 20
) -> Iterator[pa.RecordBatch]:
    """Record batches of :data:`LINE_SCHEMA` for every line of ``stream`` (empty lines too).

    ``limit``: lines longer than this are cut to their first ``keep`` bytes (``_size``
    keeps the true length). Memory stays below ``limit + chunk_bytes`` whatever the file.
    """
    keep = min(keep, limit)
    carry = b""  # head of the line the previous chunk ended in
    carry_dropped = 0  # bytes of that line not kept (it is over the limit)
    next_line = 1
    first = True
    while True:
        chunk = stream.read(max(chunk_bytes, len(_BOM)) if first else chunk_bytes)
        if not chunk:
            break
        if first:
            first = False
            if chunk.startswith(_BOM):
                chunk = chunk[len(_BOM):]
                if not chunk:
                    continue
        data = carry + chunk if carry else chunk
        arr = np.frombuffer(data, dtype=np.uint8)
        nl = np.flatnonzero(arr == _NL)
        if len(nl) == 0:
            carry, carry_dropped = _bounded(data, carry_dropped, limit, keep)
            continue
        starts = np.concatenate(([0], nl[:-1] + 1))
        batch = _batch(arr, starts, nl, file, next_line, carry_dropped, limit, keep)
        next_line += len(nl)
        yield batch
        carry, carry_dropped = _bounded(data[int(nl[-1]) + 1 :], 0, limit, keep)
    if carry or carry_dropped:
        arr = np.frombuffer(carry, dtype=np.uint8)
        yield _batch(arr, np.array([0]), np.array([len(carry)]), file, next_line, carry_dropped, limit, keep)


def _bounded(head: bytes, dropped: int, limit: int, keep: int) -> tuple[bytes, int]:
    """The unfinished line's head, cut to ``keep`` bytes once it is known to be over the limit."""
    if len(head) + dropped > limit and len(head) > keep:
        return head[:keep], dropped + len(head) - keep
    return head, dropped


def _batch(
    arr: np.ndarray, starts: np.ndarray, ends: np.ndarray, file: str, first_line: int,
    first_dropped: int, limit: int, keep: int,
) -> pa.RecordBatch:
    """Lines ``arr[starts[i]:ends[i]]`` (``ends`` at their ``\\n``) as one record batch."""
    starts = starts.astype(np.int64)
    ends = ends.astype(np.int64)
    # A "\r" before the "\n" is part of the line ending, not of the record.
    nonempty = ends > starts
    cr = np.zeros(len(ends), dtype=bool)
    cr[nonempty] = arr[ends[nonempty] - 1] == _CR
    ends = ends - cr
    sizes = ends - starts
    sizes[0] += first_dropped
    kept = np.where(sizes > limit, np.minimum(ends - starts, keep), ends - starts)
    # Gather the kept bytes of every line into one contiguous buffer (Arrow's layout):
    # mark each line's kept range with +1/-1 and integrate.
    marks = np.zeros(len(arr) + 1, dtype=np.int32)
    np.add.at(marks, starts, 1)
    np.add.at(marks, starts + kept, -1)
    data = arr[np.cumsum(marks[:-1]) > 0]
    offsets = np.concatenate(([0], np.cumsum(kept))).astype(np.int64)
    raw = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(starts), [None, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())]
    ).cast(pa.binary())
    return pa.RecordBatch.from_arrays(
        [
            pa.array([file] * len(starts), pa.string()),
            pa.array(np.arange(first_line, first_line + len(starts), dtype=np.int64)),
            raw,
            pa.array(sizes, pa.int64()),
        ],
        schema=LINE_SCHEMA,
    )

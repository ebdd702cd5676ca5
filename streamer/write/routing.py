"""Where inserts go: fill the partition's small file groups first, then open new ones.

This is what RFC-06 buys: because our log blocks are indexed, an insert appended to a
small file group's log is found by the next lookup, so a stream of small batches no
longer mints one tiny file group per batch. Sizing follows Hudi's upsert partitioner:

* a file group is *small* when base + logs are below ``small_file_limit``;
* small groups are filled smallest first, each up to ``max_file_size``
  (capacity = free bytes / average record size);
* what is left opens new file groups of ``max_file_size`` each, spread evenly so the
  last one is not a runt.

Pure functions over sizes and counts: no I/O, trivially unit-tested.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from streamer.data import key_order


@dataclass(frozen=True)
class FileGroupSize:
    """What routing needs to know about an existing file group."""

    partition: str
    file_id: str
    base_instant: str
    size_bytes: int


@dataclass(frozen=True)
class InsertBucket:
    """``count`` inserts go to ``file_id`` (``None``: a new file group)."""

    partition: str
    count: int
    file_id: str | None = None
    base_instant: str | None = None


def plan_inserts(
    partition: str,
    num_inserts: int,
    groups: list[FileGroupSize],
    avg_record_size: int,
    small_file_limit: int,
    max_file_size: int,
) -> list[InsertBucket]:
    """Bin-pack ``num_inserts`` records of one partition into buckets."""
    if num_inserts <= 0:
        return []
    avg = max(1, int(avg_record_size))
    buckets: list[InsertBucket] = []
    remaining = num_inserts
    small = sorted(
        (g for g in groups if g.partition == partition and g.size_bytes < small_file_limit),
        key=lambda g: (g.size_bytes, g.file_id),
    )
    for g in small:
        if remaining == 0:
            break
        capacity = (max_file_size - g.size_bytes) // avg
        take = min(remaining, capacity)
        if take > 0:
            buckets.append(InsertBucket(partition, int(take), g.file_id, g.base_instant))
            remaining -= take
    if remaining > 0:
        per_bucket = max(1, max_file_size // avg)
        n_new = math.ceil(remaining / per_bucket)
        base, extra = divmod(remaining, n_new)
        for i in range(n_new):
            buckets.append(InsertBucket(partition, base + (1 if i < extra else 0)))
    return buckets


def assign_rows(keys: pa.Array | np.ndarray, buckets: list[InsertBucket]) -> pa.Array:
    """Bucket index per row: rows sorted by key are cut into contiguous runs.

    Contiguous key ranges keep each file group's min/max tight, so range pruning in
    the index stays effective as the table grows. ``keys``: strings, or the same keys as
    :func:`streamer.data.short_keys` integers.
    """
    n = len(keys)
    counts = np.array([b.count for b in buckets], dtype=np.int64)
    if int(counts.sum()) != n:
        raise ValueError(f"buckets hold {int(counts.sum())} rows but {n} rows were given")
    order = key_order(keys)
    bucket_of_sorted = np.repeat(np.arange(len(buckets), dtype=np.int32), counts)
    out = np.empty(n, dtype=np.int32)
    out[order] = bucket_of_sorted
    return pa.array(out)

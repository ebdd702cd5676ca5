"""What a commit's planning needs, and the plan decided from a batch's keys.

The local engine plans on the driver: keys collected, looked up and planned in one
process (:func:`plan_on_driver`). The Spark engine runs the same function on executors,
once per table partition with the request cut to that partition's slices
(:func:`partition_request`): every decision of the plan - a key's duplicates, the file
group an update or delete finds, the bin-packing of a partition's inserts, the bucket
index's file groups - looks no further than the row's partition, so a partition planned
alone routes each row as the whole batch planned at once does, and the driver receives
write statistics, never keys (so the driver's memory does not bound the batch size).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from streamer.data import dictionary_encoded, short_keys
from streamer.fs import FileSystem
from streamer.index.bloom_index import BloomIndex
from streamer.index.bucket import bucket_ids
from streamer.index.slice_members import LookupStats
from streamer.table.fsview import FileSlice
from streamer.table.identity import IndexConfig
from streamer.write.keygen import PARTITION_PATH_COL, RECORD_KEY_COL
from streamer.write.plan import (
    PlanTarget,
    SizingPolicy,
    WritePlan,
    build_bucket_plan,
    build_plan,
)

BUCKET_COL = "_mor_bucket_id"  # the bucket index's bucket of the row
#: what :func:`tag_buckets` appends (bucket index)
BUCKET_COLUMN = pa.field(BUCKET_COL, pa.int32())


@dataclass(frozen=True)
class PlanRequest:
    """Everything a commit's tagging and planning needs (picklable: it may travel)."""

    op: str  # upsert | insert | delete | bulk_insert
    index: IndexConfig
    fs: FileSystem
    base_path: str
    slices: list[FileSlice]
    log_versions: dict[tuple[str, str, str], int]
    append_to: Mapping[tuple[str, str], FileSlice]
    is_committed: Callable[[str], bool]
    on_corrupt: Callable[[FileSlice, list], None] | None
    instant: str
    sizing: SizingPolicy
    parallelism: int = 1
    #: the field that decides between two rows of a key (the global index compares a moving
    #: row's with the stored one's; routed deletes are combined by it): the table's
    #: ordering field, None when the latest write wins (TableConfig.combine_field)
    ordering_field: str | None = None
    #: groups a pending clustering will rewrite (:attr:`PlanTarget.clustering`)
    clustering: frozenset[tuple[str, str]] = frozenset()

    @property
    def target(self) -> PlanTarget:
        """What the plan is made against (the planners' part of the request)."""
        return PlanTarget(self.slices, self.log_versions, self.instant, self.append_to, self.clustering)

    @property
    def looks_up(self) -> bool:
        """The bloom index is asked (upserts and deletes; the bucket index never is)."""
        return self.op in ("upsert", "delete") and not self.index.is_bucket


@dataclass
class Planned:
    """A commit's plan and what deciding it cost the driver."""

    plan: WritePlan
    lookup: LookupStats | None = None
    seeds: dict | None = None
    #: rows of record keys the driver held to decide the plan (0: tagged elsewhere)
    driver_keys: int = 0
    #: rows of statistics the driver received instead (Spark: one write stat per file group
    #: written and one row count per table partition; known once the write has run)
    driver_summary_rows: int = 0
    #: global index: rows moved to a new partition, and incoming rows dropped because the
    #: stored row is newer (:mod:`streamer.write.moves`)
    moved: int = 0
    stale: int = 0


@dataclass(frozen=True)
class EngineStats:
    """Where a commit's plan was decided and what the driver held for it (the bounded-
    driver guarantee is asserted on these: the Spark engine collects write statistics,
    not keys)."""

    engine: str
    driver_keys: int  # record keys collected to the driver
    driver_summary_rows: int  # rows of per-file-group/partition statistics collected instead


def _str(col: Any) -> pa.Array:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return arr if arr.type == pa.string() else arr.cast(pa.string())


# ----------------------------------------------------------------------------- driver
def plan_on_driver(keys: pa.Table, req: PlanRequest) -> Planned:
    """Look ``keys`` up and plan on the driver (the local engine's path)."""
    if req.index.is_bucket:
        buckets = bucket_ids(keys.column(RECORD_KEY_COL), req.index.bucket_count, req.index.hash_fields)
        plan = build_bucket_plan(keys, buckets, req.index.bucket_count, req.target, req.base_path)
        return Planned(plan, driver_keys=keys.num_rows)
    file_ids = lookup = seeds = None
    short = short_keys(keys.column(RECORD_KEY_COL))  # once, for the lookup, the plan and the write
    # the partitions hashed once, for the lookup's split and the plan's (each hashed a
    # million paths again: ~2% of a 1M-row upsert)
    parts = dictionary_encoded(keys.column(PARTITION_PATH_COL).combine_chunks())
    if req.looks_up:
        index = BloomIndex(req.fs, req.slices, req.is_committed, req.parallelism, on_corrupt=req.on_corrupt)
        res = index.lookup(keys.column(RECORD_KEY_COL), parts, short=short)
        file_ids, lookup, seeds = res.file_ids, res.stats, index.slice_seeds
    return plan_tagged(keys, file_ids, req, lookup, seeds, short=short, partitions=parts)


def plan_tagged(keys: pa.Table, file_ids: pa.Array | None, req: PlanRequest,
                lookup: LookupStats | None = None, seeds: dict | None = None, *,
                short: np.ndarray | None = None, partitions: pa.DictionaryArray | None = None) -> Planned:
    """Plan ``keys`` whose file groups are known (``file_ids``, null = insert); ``short``:
    their :func:`streamer.data.short_keys` integers, ``partitions`` their partition paths
    dictionary-encoded, if made already."""
    plan = build_plan(keys, file_ids, req.target, req.sizing, short=short, partitions=partitions)
    return Planned(plan, lookup, seeds, driver_keys=keys.num_rows)


# ----------------------------------------------------------------------------- per partition
def partition_request(req: PlanRequest, partition: str, parallelism: int | None = None) -> PlanRequest:
    """``req`` for one table partition: only its slices (what its lookup and its inserts'
    bin-packing may use), and the threads of the process that plans it."""
    slices = [s for s in req.slices if s.partition_path == partition]
    return replace(req, slices=slices, parallelism=req.parallelism if parallelism is None else parallelism)


def tag_buckets(rows: pa.Table, index: IndexConfig) -> pa.Table:
    """``rows`` with each row's bucket appended (:data:`BUCKET_COLUMN`): a hash, computed
    wherever the row is (the Spark engine shuffles by partition and bucket)."""
    buckets = bucket_ids(_str(rows.column(RECORD_KEY_COL)), index.bucket_count, index.hash_fields)
    return rows.append_column(BUCKET_COLUMN, pa.array(buckets, pa.int32()))

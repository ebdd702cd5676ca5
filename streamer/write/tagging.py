"""Tagging and planning as two halves: per-row work anywhere, a plan from counts alone.

Why: the Spark engine must not bring a batch's keys to the driver (issue 13: the driver
then bounds the batch size). Routing needs only counts - how many rows update or delete
in each file group, how many are inserts in each partition - so a commit splits into

1. :func:`tag_rows` / :func:`tag_buckets` - per row, where the work runs (executors):
   the row's operation and, for an insert, its *rank* among its partition's inserts in
   key order (the index lookup runs there too, for the whole partition at once);
2. :func:`plan_from_counts` / :func:`bucket_plan_from_counts` - on the driver, from the
   tagged rows' counts (one row per touched file group or partition): the same tasks
   :func:`~streamer.write.plan.build_plan` would decide;
3. :meth:`CountPlan.assign` - per row again: task and operation from the (small) plan.
   An insert's rank picks its insert bucket exactly as
   :func:`~streamer.write.routing.assign_rows` cuts a partition's sorted keys into
   contiguous runs, so file groups keep tight key ranges.

The driver-side path (:func:`plan_on_driver`) is the local engine's: keys collected,
looked up and planned in one process, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer.fs import FileSystem
from streamer.index.bloom_index import BloomIndex
from streamer.index.bucket import bucket_file_id, bucket_ids, bucket_layout
from streamer.index.slice_members import LookupStats
from streamer.table.fsview import FileSlice
from streamer.table.naming import new_file_id
from streamer.write.config import IndexConfig
from streamer.write.filegroup import OP_COL, OP_DELETE, OP_INSERT, OP_UPDATE, FileGroupTask
from streamer.write.keygen import PARTITION_PATH_COL, RECORD_KEY_COL
from streamer.write.plan import (
    OP_DROP,
    TASK_COL,
    SizingPolicy,
    WritePlan,
    _existing_tasks,
    _slice_size,
    build_bucket_plan,
    build_plan,
)
from streamer.write.prepare import IS_DELETE_COL
from streamer.write.routing import FileGroupSize, plan_inserts

ROW_COL = "_mor_row"  # a row's id (tests)
FILE_ID_COL = "_mor_file_id"  # the file group an update/delete found (null: insert/drop)
RANK_COL = "_mor_rank"  # an insert's position among its partition's inserts, in key order
BUCKET_COL = "_mor_bucket_id"  # the bucket index's bucket of the row
COUNT_COL = "count"
UPSERTS_COL = "upserts"

#: what :func:`tag_rows` appends (bloom index / no lookup)
TAG_COLUMNS = (
    pa.field(FILE_ID_COL, pa.string()),
    pa.field(OP_COL, pa.int8()),
    pa.field(RANK_COL, pa.int64()),
)
#: what :func:`tag_buckets` appends (bucket index)
BUCKET_COLUMN = pa.field(BUCKET_COL, pa.int32())
#: what :meth:`CountPlan.assign` appends, after dropping the tag columns
ASSIGN_COLUMNS = (pa.field(TASK_COL, pa.int32()), pa.field(OP_COL, pa.int8()))
_TAG_NAMES = (FILE_ID_COL, OP_COL, RANK_COL, BUCKET_COL)


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
    #: rows of statistics the driver received instead (one per file group / partition)
    driver_summary_rows: int = 0


@dataclass(frozen=True)
class EngineStats:
    """Where a commit's plan was decided and what the driver held for it (the bounded-
    driver guarantee is asserted on these: the Spark engine collects statistics, not keys)."""

    engine: str
    driver_keys: int  # record keys collected to the driver
    driver_summary_rows: int  # rows of per-group/partition counts collected instead


def _str(col: Any) -> pa.Array:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return arr if arr.type == pa.string() else arr.cast(pa.string())


# ----------------------------------------------------------------------------- driver
def plan_on_driver(keys: pa.Table, req: PlanRequest) -> Planned:
    """Look ``keys`` up and plan on the driver (the local engine's path)."""
    if req.index.is_bucket:
        buckets = bucket_ids(keys.column(RECORD_KEY_COL), req.index.num_buckets, req.index.hash_fields)
        plan = build_bucket_plan(keys, buckets, req.index.num_buckets, req.slices, req.log_versions,
                                 req.instant, req.base_path, append_to=req.append_to)
        return Planned(plan, driver_keys=keys.num_rows)
    file_ids = lookup = seeds = None
    if req.looks_up:
        index = BloomIndex(req.fs, req.slices, req.is_committed, req.parallelism, on_corrupt=req.on_corrupt)
        res = index.lookup(keys.column(RECORD_KEY_COL), keys.column(PARTITION_PATH_COL))
        file_ids, lookup, seeds = res.file_ids, res.stats, index.slice_seeds
    plan = build_plan(keys, file_ids, req.slices, req.log_versions, req.instant, req.sizing,
                      append_to=req.append_to)
    return Planned(plan, lookup, seeds, driver_keys=keys.num_rows)


# ----------------------------------------------------------------------------- per row
def lookup_partition(keys: pa.Table, req: PlanRequest) -> pa.Array | None:
    """File id per row of one partition's keys (null: not in the table), looked up in that
    partition's slices only - where the rows are (an executor reads the footers and key
    columns it needs from the table's shared storage)."""
    if not req.looks_up or keys.num_rows == 0:
        return None
    part = keys.column(PARTITION_PATH_COL)[0].as_py()
    slices = [s for s in req.slices if s.partition_path == part]
    if not slices:
        return None
    index = BloomIndex(req.fs, slices, req.is_committed, req.parallelism, on_corrupt=req.on_corrupt)
    return index.lookup(_str(keys.column(RECORD_KEY_COL)), _str(keys.column(PARTITION_PATH_COL))).file_ids


def tag_rows(rows: pa.Table, file_ids: pa.Array | None) -> pa.Table:
    """``rows`` of ONE partition (key, partition, is-delete columns, any others passed
    through) with :data:`TAG_COLUMNS` appended: the file id the index found, the row's
    operation and, for an insert, its rank among the partition's inserts in key order."""
    n = rows.num_rows
    is_delete = pc.fill_null(rows.column(IS_DELETE_COL), False).to_numpy(zero_copy_only=False)
    if file_ids is None:
        file_ids = pa.nulls(n, pa.string())
    found = pc.is_valid(file_ids).to_numpy(zero_copy_only=False)
    ops = np.full(n, OP_DROP, dtype=np.int8)
    ops[found & ~is_delete] = OP_UPDATE
    ops[found & is_delete] = OP_DELETE
    inserts = np.flatnonzero(~found & ~is_delete)
    ops[inserts] = OP_INSERT
    rank = np.full(n, -1, dtype=np.int64)
    if len(inserts):
        order = pc.sort_indices(_str(rows.column(RECORD_KEY_COL)).take(pa.array(inserts))).to_numpy()
        rank[inserts[order]] = np.arange(len(inserts), dtype=np.int64)
    return (rows.append_column(TAG_COLUMNS[0], _str(file_ids))
            .append_column(TAG_COLUMNS[1], pa.array(ops))
            .append_column(TAG_COLUMNS[2], pa.array(rank)))


def tag_buckets(rows: pa.Table, index: IndexConfig) -> pa.Table:
    """``rows`` with each row's bucket appended (:data:`BUCKET_COLUMN`): a hash, computed
    wherever the row is."""
    buckets = bucket_ids(_str(rows.column(RECORD_KEY_COL)), index.num_buckets, index.hash_fields)
    return rows.append_column(BUCKET_COLUMN, pa.array(buckets, pa.int32()))


def count_tags(tagged: pa.Table) -> pa.Table:
    """The statistics the driver plans from: rows per (partition, file id, operation)."""
    keys = [PARTITION_PATH_COL, FILE_ID_COL, OP_COL]
    out = tagged.select(keys).group_by(keys).aggregate([([], "count_all")])
    return out.select([*keys, "count_all"]).rename_columns([*keys, COUNT_COL])


def count_buckets(tagged: pa.Table) -> pa.Table:
    """Rows and upserts (non-deletes) per (partition, bucket)."""
    keys = [PARTITION_PATH_COL, BUCKET_COL]
    upserts = pc.cast(pc.invert(pc.fill_null(tagged.column(IS_DELETE_COL), False)), pa.int64())
    t = tagged.select(keys).append_column(UPSERTS_COL, upserts)
    out = t.group_by(keys).aggregate([([], "count_all"), (UPSERTS_COL, "sum")])
    return out.select([*keys, "count_all", f"{UPSERTS_COL}_sum"]).rename_columns([*keys, COUNT_COL, UPSERTS_COL])


# ----------------------------------------------------------------------------- the plan
@dataclass
class CountPlan:
    """The tasks, and what a row needs to find its own: small, shipped to the rows."""

    tasks: dict[int, FileGroupTask]
    new_partitions: list[str]
    #: ``partition \\0 file id`` (bloom) or ``partition \\0 bucket`` (bucket) -> task id
    groups: dict[str, int] = field(default_factory=dict)
    #: bucket index: the groups that are new file groups (their rows are inserts)
    new_groups: frozenset[str] = frozenset()
    #: per partition: cumulative insert-bucket sizes and each insert bucket's task id
    inserts: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    bucket: bool = False

    def assign(self, tagged: pa.Table) -> pa.Table:
        """The tagged rows without their tag columns, with their task and operation
        (:data:`ASSIGN_COLUMNS`) appended; dropped rows left out."""
        return self._assign_buckets(tagged) if self.bucket else self._assign_tags(tagged)

    def _group_tids(self, parts: pa.Array, second: pa.Array) -> np.ndarray:
        if len(parts) == 0:
            return np.zeros(0, dtype=np.int32)
        enc = pc.dictionary_encode(pc.binary_join_element_wise(parts, second, "\x00"))
        lut = np.array([self.groups.get(g, -1) for g in enc.dictionary.to_pylist()], dtype=np.int32)
        return lut[enc.indices.to_numpy(zero_copy_only=False)]

    def _assign_tags(self, tagged: pa.Table) -> pa.Table:
        tagged = tagged.filter(pc.not_equal(tagged.column(OP_COL), OP_DROP))
        ops = tagged.column(OP_COL).to_numpy()
        parts = _str(tagged.column(PARTITION_PATH_COL))
        tids = np.full(len(ops), -1, dtype=np.int32)
        touched = np.flatnonzero(ops != OP_INSERT)
        if len(touched):
            idx = pa.array(touched)
            tids[touched] = self._group_tids(parts.take(idx), _str(tagged.column(FILE_ID_COL)).take(idx))
        ins = np.flatnonzero(ops == OP_INSERT)
        if len(ins):
            ranks = tagged.column(RANK_COL).to_numpy()
            ins_parts = parts.take(pa.array(ins))
            enc = pc.dictionary_encode(ins_parts)
            codes = enc.indices.to_numpy(zero_copy_only=False)
            for code, part in enumerate(enc.dictionary.to_pylist()):
                rows = ins[codes == code]
                bounds, bucket_tids = self.inserts[part]
                tids[rows] = bucket_tids[np.searchsorted(bounds, ranks[rows], side="right")]
        return _assigned(tagged, tids, ops)

    def _assign_buckets(self, tagged: pa.Table) -> pa.Table:
        parts = _str(tagged.column(PARTITION_PATH_COL))
        buckets = tagged.column(BUCKET_COL).cast(pa.string())
        tids = self._group_tids(parts, _str(buckets))
        enc_new = np.zeros(len(tids), dtype=bool)
        if self.new_groups and len(tids):
            keys = pc.binary_join_element_wise(parts, _str(buckets), "\x00")
            enc_new = pc.is_in(keys, value_set=pa.array(sorted(self.new_groups), pa.string())).to_numpy(
                zero_copy_only=False)
        is_delete = pc.fill_null(tagged.column(IS_DELETE_COL), False).to_numpy(zero_copy_only=False)
        ops = np.full(len(tids), OP_DROP, dtype=np.int8)
        found = tids >= 0
        ops[found & ~enc_new & ~is_delete] = OP_UPDATE
        ops[found & enc_new & ~is_delete] = OP_INSERT
        ops[found & ~enc_new & is_delete] = OP_DELETE
        keep = ops != OP_DROP
        return _assigned(tagged.filter(pa.array(keep)), tids[keep], ops[keep])

    def write_plan(self, rows: Any = None) -> WritePlan:
        """The :class:`WritePlan` whose assignment lives with the rows (``rows``: engine's)."""
        return WritePlan(self.tasks, None, self.new_partitions, rows=rows)


def _assigned(rows: pa.Table, tids: np.ndarray, ops: np.ndarray) -> pa.Table:
    rows = rows.drop_columns([c for c in _TAG_NAMES if c in rows.column_names])
    return (rows.append_column(ASSIGN_COLUMNS[0], pa.array(tids, pa.int32()))
            .append_column(ASSIGN_COLUMNS[1], pa.array(ops, pa.int8())))


def plan_from_counts(counts: pa.Table, req: PlanRequest) -> CountPlan:
    """The bloom-index (or no-lookup) plan from :func:`count_tags` statistics: one task per
    file group an update/delete found, the partition's inserts bin-packed (small file
    groups first) as :func:`~streamer.write.plan.build_plan` does."""
    tasks: dict[int, FileGroupTask] = {}
    existing_task = _existing_tasks(tasks, req.slices, req.log_versions, req.append_to)
    plan = CountPlan(tasks, [])
    parts = counts.column(PARTITION_PATH_COL).to_pylist()
    fids = counts.column(FILE_ID_COL).to_pylist()
    ops = counts.column(OP_COL).to_pylist()
    ns = counts.column(COUNT_COL).to_pylist()
    inserts: dict[str, int] = {}
    for part, fid, op, n in sorted(zip(parts, fids, ops, ns, strict=True), key=lambda r: (r[0], r[1] or "")):
        if op in (OP_UPDATE, OP_DELETE) and fid is not None:
            plan.groups[f"{part}\x00{fid}"] = existing_task(part, fid)
        elif op == OP_INSERT:
            inserts[part] = inserts.get(part, 0) + int(n)
    sizing = req.sizing
    sizes = ([FileGroupSize(s.partition_path, s.file_id, s.base_instant, _slice_size(s)) for s in req.slices]
             if sizing.use_small_files else [])
    existing_parts = {s.partition_path for s in req.slices}
    for part in sorted(inserts):
        if part not in existing_parts:
            plan.new_partitions.append(part)
        buckets = plan_inserts(part, inserts[part], sizes, sizing.avg_record_size,
                               sizing.small_file_limit, sizing.max_file_size)
        tids = []
        for b in buckets:
            if b.is_new:
                tid = len(tasks)
                tasks[tid] = FileGroupTask(task_id=tid, partition=part, file_id=new_file_id(0),
                                           is_new=True, base_instant=req.instant)
                tids.append(tid)
            else:
                tids.append(existing_task(part, b.file_id))
        bounds = np.cumsum([b.count for b in buckets]).astype(np.int64)
        plan.inserts[part] = (bounds, np.array(tids, dtype=np.int32))
    return plan


def bucket_plan_from_counts(counts: pa.Table, req: PlanRequest) -> CountPlan:
    """The bucket index's plan from :func:`count_buckets` statistics, decided as
    :func:`~streamer.write.plan.build_bucket_plan` does: a bucket's existing file group, or
    a new one when the bucket gets an upsert (deletes alone into an empty bucket: dropped)."""
    n_buckets = req.index.num_buckets
    layout = bucket_layout(((s.partition_path, s.file_id) for s in req.slices), n_buckets, req.base_path)
    tasks: dict[int, FileGroupTask] = {}
    existing_task = _existing_tasks(tasks, req.slices, req.log_versions, req.append_to)
    existing_parts = {s.partition_path for s in req.slices}
    plan = CountPlan(tasks, [], bucket=True)
    new_groups: set[str] = set()
    rows = zip(counts.column(PARTITION_PATH_COL).to_pylist(), counts.column(BUCKET_COL).to_pylist(),
               counts.column(UPSERTS_COL).to_pylist(), strict=True)
    for part, bucket, upserts in sorted(rows):
        key = f"{part}\x00{bucket}"
        file_id = layout.get((part, int(bucket)))
        if file_id is not None:
            plan.groups[key] = existing_task(part, file_id)
        elif upserts:
            tid = len(tasks)
            tasks[tid] = FileGroupTask(task_id=tid, partition=part, file_id=bucket_file_id(int(bucket)),
                                       is_new=True, base_instant=req.instant)
            plan.groups[key] = tid
            new_groups.add(key)
            if part not in existing_parts and part not in plan.new_partitions:
                plan.new_partitions.append(part)
    plan.new_groups = frozenset(new_groups)
    return plan

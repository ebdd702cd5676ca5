"""Driver-side planning: from tagged keys to one task per file group.

Input is the batch's key columns (record key, partition path, is-delete) and, for
upserts/deletes, the index's answer (file id per key). Output is

* one :class:`FileGroupTask` per file group the commit writes, and
* an *assignment* table aligned with the keys: the task id and operation of each row
  (``-1`` = dropped: a delete of a key the table does not hold).

Only keys travel here (never whole records). The local engine plans a whole batch here;
the Spark engine plans each table partition here, on the executor that holds its rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer.data import dictionary_encoded, rows_by_value, short_keys
from streamer.index.bucket import bucket_file_id, bucket_layout
from streamer.table.fsview import FileSlice
from streamer.table.naming import new_file_id
from streamer.write.filegroup import OP_COL, OP_DELETE, OP_INSERT, OP_UPDATE, FileGroupTask
from streamer.write.keygen import PARTITION_PATH_COL, RECORD_KEY_COL
from streamer.write.prepare import IS_DELETE_COL
from streamer.write.routing import FileGroupSize, assign_rows, plan_inserts

TASK_COL = "_mor_task"
OP_DROP = -1


@dataclass(frozen=True)
class SizingPolicy:
    small_file_limit: int
    max_file_size: int
    avg_record_size: int
    use_small_files: bool = True


@dataclass
class WritePlan:
    tasks: dict[int, FileGroupTask]
    #: record key, partition path, _mor_task, _mor_op (aligned with keys); ``None`` when
    #: the plan is decided where the rows are (Spark): then ``tasks`` is empty and
    #: ``rows`` is the engine's batch, planned and written per partition by the engine
    assignment: pa.Table | None
    new_partitions: list[str]
    rows: Any = None
    #: the assignment's record keys as :func:`streamer.data.short_keys` integers, when
    #: they fit: made once for the lookup, the inserts' bin-packing and each file group's sort
    short_keys: np.ndarray | None = None

    @property
    def num_rows(self) -> int:
        if self.assignment is None:
            raise ValueError("the assignment of this plan lives with the rows, not on the driver")
        return int(pc.sum(pc.not_equal(self.assignment.column(OP_COL), OP_DROP)).as_py() or 0)


@dataclass(frozen=True)
class PlanTarget:
    """The table state a plan is made against, the same for both planners: the slices the
    index looked keys up in (merged slices), the highest log version of every slice, the
    commit's instant, and per file group under a pending compaction the slice a write
    appends to instead (the compaction's new slice, as Hudi's async compaction does - the
    compactor then merges a slice nobody writes to any more)."""

    slices: list[FileSlice]
    log_versions: dict[tuple[str, str, str], int]
    instant: str
    append_to: Mapping[tuple[str, str], FileSlice] | None = None
    #: groups a pending (Hudi) clustering will rewrite: no insert is routed into them, and
    #: an update of theirs fails the commit (:meth:`Transaction.commit`), as Hudi's writer does
    clustering: frozenset[tuple[str, str]] = frozenset()


def _slice_size(s: FileSlice) -> int:
    size = s.base_file.size if s.base_file else 0
    return size + sum(lf.size for lf in s.log_files)


def _next_version(s: FileSlice, all_log_versions: dict[tuple[str, str, str], int]) -> int:
    return all_log_versions.get((s.partition_path, s.file_id, s.base_instant), 0) + 1


def _existing_tasks(
    tasks: dict[int, FileGroupTask],
    slices: list[FileSlice],
    all_log_versions: dict[tuple[str, str, str], int],
    append_to: Mapping[tuple[str, str], FileSlice] | None,
) -> Callable[[str, str], int]:
    """``task(partition, file_id) -> task id``: one append task per existing file group,
    added to ``tasks`` on first use (to the pending compaction's new slice if any)."""
    by_group: dict[tuple[str, str], int] = {}
    slice_of = {(s.partition_path, s.file_id): s for s in slices}

    def existing_task(partition: str, file_id: str) -> int:
        key = (partition, file_id)
        if key not in by_group:
            s = slice_of[key]
            target = append_to.get(key, s) if append_to else s
            tid = len(tasks)
            tasks[tid] = FileGroupTask(
                task_id=tid,
                partition=partition,
                file_id=file_id,
                is_new=False,
                base_instant=target.base_instant,
                base_file=target.base_file.name if target.base_file else None,
                log_files=tuple(lf.name for lf in target.log_files),
                next_log_version=_next_version(target, all_log_versions),
                slice=s,  # the whole (merged) slice: its cumulative index is chained on
            )
            by_group[key] = tid
        return by_group[key]

    return existing_task


def build_plan(keys: pa.Table, file_ids: pa.Array | None, target: PlanTarget, sizing: SizingPolicy, *,
               short: np.ndarray | None = None, partitions: pa.DictionaryArray | None = None) -> WritePlan:
    """Decide each row's file group and operation (``file_ids=None``: all inserts), against
    ``target``. ``short``: the keys as :func:`streamer.data.short_keys` integers,
    ``partitions``: the keys' partition paths dictionary-encoded, if the caller made them
    already (the groups of rows by partition are found on their codes).
    """
    slices, instant = target.slices, target.instant
    n = keys.num_rows
    parts = keys.column(PARTITION_PATH_COL).combine_chunks()
    coded = partitions if partitions is not None else dictionary_encoded(parts)
    rkeys = keys.column(RECORD_KEY_COL).combine_chunks()
    if file_ids is None:
        file_ids = pa.nulls(n, pa.string())
    ops = _row_ops(keys, file_ids)
    task_ids = np.full(n, -1, dtype=np.int32)
    tasks: dict[int, FileGroupTask] = {}
    existing_task = _existing_tasks(tasks, slices, target.log_versions, target.append_to)
    _assign_touched(ops, coded, file_ids, existing_task, task_ids)
    if short is None:
        short = short_keys(rkeys)
    open_slices = [s for s in slices if (s.partition_path, s.file_id) not in target.clustering]
    new_partitions = _assign_inserts(ops, coded, short, rkeys, open_slices, instant, sizing, tasks, existing_task,
                                     task_ids)
    return WritePlan(tasks, _assignment(rkeys, parts, task_ids, ops), new_partitions, short_keys=short)


def _row_ops(keys: pa.Table, file_ids: pa.Array) -> np.ndarray:
    """Each row's operation: found by the index = update or delete, else insert or drop."""
    is_delete = pc.fill_null(keys.column(IS_DELETE_COL).combine_chunks(), False).to_numpy(
        zero_copy_only=False
    )
    found = pc.is_valid(file_ids).to_numpy(zero_copy_only=False)
    ops = np.full(keys.num_rows, OP_DROP, dtype=np.int8)
    ops[found & ~is_delete] = OP_UPDATE
    ops[found & is_delete] = OP_DELETE
    ops[~found & ~is_delete] = OP_INSERT
    return ops


def _assign_touched(
    ops: np.ndarray,
    parts: pa.Array,
    file_ids: pa.Array,
    existing_task: Callable[[str, str], int],
    task_ids: np.ndarray,
) -> None:
    """Updates and deletes go to the group the index found: partitions and file ids are
    dictionary-encoded (the index hands its file ids over encoded already), so the task
    of each (partition, file id) pair is asked once and rows map to it by integer codes."""
    touched = np.flatnonzero((ops == OP_UPDATE) | (ops == OP_DELETE))
    if not len(touched):
        return
    at = pa.array(touched)
    fids = dictionary_encoded(file_ids.take(at))
    pids = dictionary_encoded(parts.take(at))
    n_fids = len(fids.dictionary)
    pair = pids.indices.to_numpy(zero_copy_only=False).astype(np.int64) * n_fids \
        + fids.indices.to_numpy(zero_copy_only=False)
    f_names, p_names = fids.dictionary.to_pylist(), pids.dictionary.to_pylist()
    # the pairs present, not all combinations: counted when the codes are few against the
    # rows (partitions x file ids touched), sorted otherwise (a wide table's many groups)
    if int(pair.max()) < max(1 << 16, 4 * len(pair)):
        present = np.bincount(pair) > 0
        pairs = np.flatnonzero(present)
        which = (np.cumsum(present) - 1)[pair]
    else:
        pairs, which = np.unique(pair, return_inverse=True)
    pair_tids = np.array([existing_task(p_names[c // n_fids], f_names[c % n_fids]) for c in pairs.tolist()],
                         dtype=np.int32)
    task_ids[touched] = pair_tids[which]


def _assign_inserts(
    ops: np.ndarray,
    parts: pa.Array,
    short: np.ndarray | None,
    rkeys: pa.Array,
    slices: list[FileSlice],
    instant: str,
    sizing: SizingPolicy,
    tasks: dict[int, FileGroupTask],
    existing_task: Callable[[str, str], int],
    task_ids: np.ndarray,
) -> list[str]:
    """Inserts are bin-packed per partition, into small file groups first when the sizing
    says so; returns the partitions the table did not have. ``short``: the keys as
    :func:`streamer.data.short_keys` integers, when they fit (sorted without the strings)."""
    inserts = np.flatnonzero(ops == OP_INSERT)
    new_partitions: list[str] = []
    if not len(inserts):
        return new_partitions
    existing_parts = {s.partition_path for s in slices}
    ins_parts = parts.take(pa.array(inserts))
    groups = (
        [FileGroupSize(s.partition_path, s.file_id, s.base_instant, _slice_size(s)) for s in slices]
        if sizing.use_small_files
        else []
    )
    for value, at in rows_by_value(ins_parts):
        part = str(value)  # partition paths are never null (keygen: "" for an unpartitioned table)
        if part not in existing_parts:
            new_partitions.append(part)
        rows = inserts[at]
        buckets = plan_inserts(
            part, len(rows), groups, sizing.avg_record_size, sizing.small_file_limit, sizing.max_file_size
        )
        bucket_tids = []
        for b in buckets:
            if b.file_id is None:  # a new file group
                tid = len(tasks)
                tasks[tid] = FileGroupTask(
                    task_id=tid, partition=part, file_id=new_file_id(0), is_new=True, base_instant=instant
                )
                bucket_tids.append(tid)
            else:
                bucket_tids.append(existing_task(part, b.file_id))
        which = assign_rows(short[rows] if short is not None else rkeys.take(pa.array(rows)), buckets).to_numpy()
        task_ids[rows] = np.array(bucket_tids, dtype=np.int32)[which]
    return new_partitions


def build_bucket_plan(keys: pa.Table, buckets: np.ndarray, num_buckets: int, target: PlanTarget,
                      table: str) -> WritePlan:
    """The bucket index's plan against ``target``: each row goes to its bucket's file
    group, no lookup (``table`` is named in the error of a layout Hudi would not load).

    As Hudi's ``SparkBucketIndexPartitioner`` on a MOR table: a row whose bucket already
    has a file group in its partition is appended to that group's log (inserts and
    updates alike, so it is counted as an update - whether the key exists is never
    asked); a bucket without one gets a new file group (a base file) whose id encodes
    the bucket. A delete whose bucket has no file group cannot match a record: dropped.
    Small-file bin packing does not apply: the bucket count fixes the file groups.
    """
    slices, instant = target.slices, target.instant
    n = keys.num_rows
    parts = keys.column(PARTITION_PATH_COL).combine_chunks()
    rkeys = keys.column(RECORD_KEY_COL).combine_chunks()
    is_delete = pc.fill_null(keys.column(IS_DELETE_COL).combine_chunks(), False).to_numpy(
        zero_copy_only=False
    )
    layout = bucket_layout(((s.partition_path, s.file_id) for s in slices), num_buckets, table)
    tasks: dict[int, FileGroupTask] = {}
    existing_task = _existing_tasks(tasks, slices, target.log_versions, target.append_to)
    existing_parts = {s.partition_path for s in slices}
    new_partitions: list[str] = []
    ops = np.full(n, OP_DROP, dtype=np.int8)
    task_ids = np.full(n, -1, dtype=np.int32)
    if n:
        # one (partition, bucket) code per row, vectorised; Python runs once per group
        enc = pc.dictionary_encode(parts)
        part_idx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        code = part_idx * num_buckets + buckets.astype(np.int64)
        # the codes are small (partitions x buckets): count them instead of sorting rows
        counts = np.bincount(code)
        groups = np.flatnonzero(counts)
        remap = np.zeros(len(counts), dtype=np.int64)
        remap[groups] = np.arange(len(groups))
        inverse = remap[code]
        names = enc.dictionary.to_pylist()
        group_tid = np.full(len(groups), -1, dtype=np.int32)
        group_new = np.zeros(len(groups), dtype=bool)
        has_upsert = np.bincount(inverse, weights=~is_delete, minlength=len(groups)) > 0
        for g, c in enumerate(groups.tolist()):
            partition, bucket = names[c // num_buckets], c % num_buckets
            file_id = layout.get((partition, bucket))
            if file_id is not None:
                group_tid[g] = existing_task(partition, file_id)
            elif has_upsert[g]:  # only deletes for an empty bucket: nothing to write
                tid = len(tasks)
                tasks[tid] = FileGroupTask(
                    task_id=tid, partition=partition, file_id=bucket_file_id(bucket),
                    is_new=True, base_instant=instant,
                )
                group_tid[g], group_new[g] = tid, True
                if partition not in existing_parts and partition not in new_partitions:
                    new_partitions.append(partition)
        task_ids = group_tid[inverse]
        row_new = group_new[inverse]
        row_found = task_ids >= 0
        ops[row_found & ~row_new & ~is_delete] = OP_UPDATE
        ops[row_found & ~is_delete & row_new] = OP_INSERT
        ops[row_found & ~row_new & is_delete] = OP_DELETE
        task_ids = np.where(ops == OP_DROP, -1, task_ids).astype(np.int32)
    return WritePlan(tasks, _assignment(rkeys, parts, task_ids, ops), new_partitions)


def _assignment(rkeys: pa.Array, parts: pa.Array, task_ids: np.ndarray, ops: np.ndarray) -> pa.Table:
    """Each row's task and operation, aligned with the batch's keys (both planners)."""
    return pa.table({RECORD_KEY_COL: rkeys, PARTITION_PATH_COL: parts,
                     TASK_COL: pa.array(task_ids), OP_COL: pa.array(ops)})

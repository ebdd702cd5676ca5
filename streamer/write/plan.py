"""Driver-side planning: from tagged keys to one task per file group.

Input is the batch's key columns (record key, partition path, is-delete) and, for
upserts/deletes, the index's answer (file id per key). Output is

* one :class:`FileGroupTask` per file group the commit writes, and
* an *assignment* table aligned with the keys: the task id and operation of each row
  (``-1`` = dropped: a delete of a key the table does not hold).

Only keys travel here (never whole records), which is what lets the Spark engine
collect them to the driver cheaply and join the assignment back to the data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
    assignment: pa.Table  # record key, partition path, _mor_task, _mor_op (aligned with keys)
    new_partitions: list[str]

    @property
    def num_rows(self) -> int:
        return int(pc.sum(pc.not_equal(self.assignment.column(OP_COL), OP_DROP)).as_py() or 0)


def _slice_size(s: FileSlice) -> int:
    size = s.base_file.size if s.base_file else 0
    return size + sum(lf.size for lf in s.log_files)


def _next_version(s: FileSlice, all_log_versions: dict[tuple[str, str, str], int]) -> int:
    return all_log_versions.get((s.partition_path, s.file_id, s.base_instant), 0) + 1


def build_plan(
    keys: pa.Table,
    file_ids: pa.Array | None,
    slices: list[FileSlice],
    all_log_versions: dict[tuple[str, str, str], int],
    instant: str,
    sizing: SizingPolicy,
    append_to: Mapping[tuple[str, str], FileSlice] | None = None,
) -> WritePlan:
    """Decide each row's file group and operation (``file_ids=None``: all inserts).

    ``slices`` are what the index looked keys up in (merged slices). ``append_to`` names,
    per file group under a pending compaction, the slice a write appends to instead: the
    plan's new slice (base instant = the compaction instant), as Hudi's async compaction
    does - the compactor then merges a slice nobody writes to any more.
    """
    n = keys.num_rows
    parts = keys.column(PARTITION_PATH_COL).combine_chunks()
    rkeys = keys.column(RECORD_KEY_COL).combine_chunks()
    is_delete = pc.fill_null(keys.column(IS_DELETE_COL).combine_chunks(), False).to_numpy(
        zero_copy_only=False
    )
    if file_ids is None:
        found = np.zeros(n, dtype=bool)
        file_ids = pa.nulls(n, pa.string())
    else:
        found = pc.is_valid(file_ids).to_numpy(zero_copy_only=False)
    ops = np.full(n, OP_DROP, dtype=np.int8)
    ops[found & ~is_delete] = OP_UPDATE
    ops[found & is_delete] = OP_DELETE
    ops[~found & ~is_delete] = OP_INSERT
    task_ids = np.full(n, -1, dtype=np.int32)

    tasks: dict[int, FileGroupTask] = {}
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

    # updates and deletes: the group the index found (dictionary-encode to stay vectorised)
    touched = np.flatnonzero((ops == OP_UPDATE) | (ops == OP_DELETE))
    if len(touched):
        group_key = pc.binary_join_element_wise(
            parts.take(pa.array(touched)), file_ids.take(pa.array(touched)), "\x00"
        )
        enc = pc.dictionary_encode(group_key)
        dict_tids = np.array(
            [existing_task(*g.split("\x00", 1)) for g in enc.dictionary.to_pylist()], dtype=np.int32
        )
        task_ids[touched] = dict_tids[enc.indices.to_numpy(zero_copy_only=False)]

    # inserts: bin-pack per partition
    inserts = np.flatnonzero(ops == OP_INSERT)
    new_partitions: list[str] = []
    existing_parts = {s.partition_path for s in slices}
    if len(inserts):
        ins_parts = parts.take(pa.array(inserts))
        groups = (
            [FileGroupSize(s.partition_path, s.file_id, s.base_instant, _slice_size(s)) for s in slices]
            if sizing.use_small_files
            else []
        )
        for part in pc.unique(ins_parts).to_pylist():
            if part not in existing_parts:
                new_partitions.append(part)
            rows = inserts[pc.equal(ins_parts, part).to_numpy(zero_copy_only=False)]
            buckets = plan_inserts(
                part,
                len(rows),
                groups,
                sizing.avg_record_size,
                sizing.small_file_limit,
                sizing.max_file_size,
            )
            bucket_tids = []
            for b in buckets:
                if b.is_new:
                    tid = len(tasks)
                    tasks[tid] = FileGroupTask(
                        task_id=tid,
                        partition=part,
                        file_id=new_file_id(0),
                        is_new=True,
                        base_instant=instant,
                    )
                    bucket_tids.append(tid)
                else:
                    bucket_tids.append(existing_task(part, b.file_id))
            which = assign_rows(rkeys.take(pa.array(rows)), buckets).to_numpy()
            task_ids[rows] = np.array(bucket_tids, dtype=np.int32)[which]

    assignment = pa.table(
        {
            RECORD_KEY_COL: rkeys,
            PARTITION_PATH_COL: parts,
            TASK_COL: pa.array(task_ids),
            OP_COL: pa.array(ops),
        }
    )
    return WritePlan(tasks, assignment, new_partitions)

"""``build_bucket_plan``: rows go to their bucket's file group, decided from keys alone."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from streamer.errors import CorruptDataError
from streamer.index.bucket import bucket_file_id, bucket_of_file_id
from streamer.table.fsview import FileSlice
from streamer.write.filegroup import OP_COL, OP_DELETE, OP_INSERT, OP_UPDATE
from streamer.write.keygen import PARTITION_PATH_COL, RECORD_KEY_COL
from streamer.write.plan import OP_DROP, TASK_COL, PlanTarget, build_bucket_plan
from streamer.write.prepare import IS_DELETE_COL


def _keys(rows: list[tuple[str, str, bool]]) -> pa.Table:
    return pa.table({
        RECORD_KEY_COL: pa.array([r[0] for r in rows], pa.string()),
        PARTITION_PATH_COL: pa.array([r[1] for r in rows], pa.string()),
        IS_DELETE_COL: pa.array([r[2] for r in rows]),
    })


def _slice(partition: str, file_id: str, base_instant: str = "001") -> FileSlice:
    return FileSlice(partition_path=partition, file_id=file_id, base_instant=base_instant)


def test_existing_buckets_take_appends_new_buckets_get_new_groups_deletes_of_empty_buckets_drop():
    g0, g1 = bucket_file_id(0), bucket_file_id(1)
    slices = [_slice("p", g0), _slice("q", g1)]
    keys = _keys([("a", "p", False), ("b", "p", False), ("c", "p", True), ("d", "p", True),
                  ("e", "q", False), ("f", "r", False), ("g", "r", True)])
    buckets = np.array([0, 2, 0, 3, 1, 2, 2], np.int32)
    plan = build_bucket_plan(keys, buckets, 4, PlanTarget(slices, {}, "005"), "t")
    ops = plan.assignment.column(OP_COL).to_pylist()
    assert ops == [OP_UPDATE, OP_INSERT, OP_DELETE, OP_DROP, OP_UPDATE, OP_INSERT, OP_DROP]
    tids = plan.assignment.column(TASK_COL).to_pylist()
    tasks = plan.tasks
    assert tasks[tids[0]].file_id == g0 and not tasks[tids[0]].is_new
    assert tids[0] == tids[2]  # the update and the delete of bucket 0: one task
    assert tasks[tids[4]].file_id == g1
    new_p, new_r = tasks[tids[1]], tasks[tids[5]]
    assert new_p.is_new and bucket_of_file_id(new_p.file_id) == 2 and new_p.base_instant == "005"
    assert new_r.is_new and new_r.partition == "r" and bucket_of_file_id(new_r.file_id) == 2
    assert tids[3] == tids[6] == -1
    assert plan.new_partitions == ["r"]
    assert len(tasks) == 4 and plan.num_rows == 5


def test_only_deletes_for_an_empty_bucket_open_no_group():
    plan = build_bucket_plan(_keys([("x", "p", True)]), np.array([1], np.int32), 2, PlanTarget([], {}, "002"), "t")
    assert plan.tasks == {} and plan.num_rows == 0 and plan.new_partitions == []


def test_pending_compaction_appends_to_the_new_slice():
    g0 = bucket_file_id(0)
    old = _slice("p", g0, "001")
    new = _slice("p", g0, "003")  # the compaction plan's slice (base instant = plan instant)
    plan = build_bucket_plan(_keys([("a", "p", False)]), np.array([0], np.int32), 1,
                             PlanTarget([old], {("p", g0, "003"): 2}, "004", append_to={("p", g0): new}), "t")
    (task,) = plan.tasks.values()
    assert (task.base_instant, task.next_log_version, task.slice) == ("003", 3, old)


def test_two_groups_in_one_bucket_are_refused():
    slices = [_slice("p", bucket_file_id(0)), _slice("p", bucket_file_id(0))]
    with pytest.raises(CorruptDataError, match="both claim bucket 0"):
        build_bucket_plan(_keys([("a", "p", False)]), np.array([0], np.int32), 2, PlanTarget(slices, {}, "002"), "t")

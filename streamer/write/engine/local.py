"""Local engine: the core functions on the driver, file groups in a thread pool.

Best for small micro-batches (no job scheduling, no serialization): the batch is one
Arrow table, the key columns the index needs are a zero-copy projection of it, and
file groups are written concurrently (Parquet/gzip encoding and I/O release the GIL).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer import defaults
from streamer.data import key_order, short_keys, stable_order
from streamer.data import to_arrow as batch_to_arrow
from streamer.table.metadata import WriteStat
from streamer.write.engine.base import Engine, Prepared
from streamer.write.filegroup import OP_COL, WriteContext, write_file_group
from streamer.write.keygen import DEFAULT_PARTITION, PARTITION_PATH_COL, RECORD_KEY_COL
from streamer.write.moves import route_global, route_orphan_deletes
from streamer.write.plan import OP_DROP, TASK_COL, WritePlan
from streamer.write.prepare import (
    IS_DELETE_COL,
    KEY_COLUMNS,
    PrepareSpec,
    latest_per_key,
    prepare_rows,
)
from streamer.write.tagging import Planned, PlanRequest, plan_tagged

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


def to_arrow(data: Any) -> pa.Table:
    """Accept an Arrow table/batch, a Spark DataFrame or anything ``pa.table`` takes."""
    return batch_to_arrow(data)


def task_groups(task_ids: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Each task id with the row numbers that go to it, in arrival order (one stable
    integer sort on the driver; no copy of the rows)."""
    if len(task_ids) == 0:
        return []
    order = stable_order(task_ids, int(task_ids.max()) + 1) if task_ids.min() >= 0 else \
        np.argsort(task_ids, kind="stable")
    tids = task_ids[order]
    starts = np.flatnonzero(np.r_[True, tids[1:] != tids[:-1]])
    ends = np.r_[starts[1:], len(tids)]
    return [(int(tids[s]), order[s:e]) for s, e in zip(starts, ends, strict=True)]


def task_order(rows: pa.Table, idx: np.ndarray, short: np.ndarray | None = None) -> np.ndarray:
    """The row numbers ``idx`` of one task in record-key order (stably): the order the
    file-group writer needs, so it skips its own sort. Run by the task's own thread: the
    batch's key sort and gather happen in parallel, a few thousand rows at a time, not on
    the driver.

    ``short``: the batch's keys as :func:`streamer.data.short_keys` integers, when they
    fit; sorted as integers, without gathering the strings (a sixth of the cost)."""
    if len(idx) > 1 and short is not None:
        return idx[key_order(short[idx])]
    if RECORD_KEY_COL in rows.column_names and len(idx) > 1:
        return idx[key_order(rows.column(RECORD_KEY_COL).take(pa.array(idx)))]  # ties keep arrival order
    return idx


def run_tasks(fn: Callable[[T], R], items: Sequence[T], parallelism: int) -> list[R]:
    """``[fn(i) for i in items]`` on ``parallelism`` threads, the calling thread one of
    them (it would only wait otherwise, and its interpreter and allocator are warm).

    Threads take the next item as they finish one. After a failure no new item starts;
    the first error is raised once the items under way have ended.
    """
    if parallelism <= 1 or len(items) <= 1:
        return [fn(i) for i in items]
    results: list[Any] = [None] * len(items)
    lock = threading.Lock()
    pending = iter(range(len(items)))
    failed: list[BaseException] = []

    def work() -> None:
        while True:
            with lock:
                i = None if failed else next(pending, None)
            if i is None:
                return
            try:
                results[i] = fn(items[i])
            except BaseException as e:  # noqa: BLE001 - re-raised below, on the caller's thread
                with lock:
                    failed.append(e)
                return

    helpers = min(parallelism, len(items)) - 1
    with ThreadPoolExecutor(helpers, thread_name_prefix="fg-writer") as ex:
        futures = [ex.submit(work) for _ in range(helpers)]
        work()
        for f in futures:
            f.result()
    if failed:
        raise failed[0]
    return results


class LocalEngine(Engine):
    name = "local"

    def __init__(self, parallelism: int = defaults.LOCAL_THREADS) -> None:
        self.parallelism = max(1, parallelism)

    def prepare(self, data: Any, spec: PrepareSpec, combine: bool) -> Prepared:
        table = to_arrow(data)
        rows = prepare_rows(table, spec)
        if combine:
            rows = latest_per_key(rows, spec.cfg.combine_field, key_fields=spec.cfg.record_key_fields,
                                  by_partition=not spec.cfg.index.is_global)
        return Prepared(rows.select(list(KEY_COLUMNS)), table.num_rows, rows)

    def plan(self, prepared: Prepared, request: PlanRequest) -> Planned:
        """The driver's plan; with a global index, rows whose key is stored in another
        partition are re-routed first (:mod:`streamer.write.moves`), which may add rows;
        with a per-partition one (bloom or bucket), deletes that carry no partition value are."""
        if request.op in ("upsert", "delete") and not request.index.is_global:
            orphans = route_orphan_deletes(prepared.handle, request)
            if orphans is not None:
                prepared.handle = orphans.rows
                prepared.keys = orphans.rows.select(list(KEY_COLUMNS))
                log.info("%d delete(s) without a partition value sent to the partitions that hold their keys",
                         len(orphans.sent))
        if not (request.index.is_global and request.looks_up):
            return super().plan(prepared, request)
        routed = route_global(prepared.handle, request, request.ordering_field,
                              request.index.update_partition_path)
        prepared.handle, prepared.keys = routed.rows, routed.keys
        planned = plan_tagged(routed.keys, routed.file_ids, request, routed.lookup, routed.seeds)
        planned.moved, planned.stale = routed.moved, routed.stale
        return planned

    def write(self, prepared: Prepared, plan: WritePlan, ctx: WriteContext) -> list[WriteStat]:
        rows: pa.Table = prepared.handle
        a = plan.assignment
        if a is None:  # the local engine plans on the driver, where the assignment stays
            raise ValueError("the plan's assignment is not on the driver")
        rows = rows.append_column(TASK_COL, a.column(TASK_COL)).append_column(OP_COL, a.column(OP_COL))
        short = plan.short_keys
        if short is None and RECORD_KEY_COL in rows.column_names:
            short = short_keys(rows.column(RECORD_KEY_COL))
        dropped = pc.equal(rows.column(OP_COL), OP_DROP)
        if pc.any(dropped).as_py():
            kept = pc.invert(dropped)
            rows = rows.filter(kept)
            short = None if short is None else short[kept.to_numpy(zero_copy_only=False)]
        groups = task_groups(rows.column(TASK_COL).to_numpy())
        # what a file group writes: the data, the record key and the operation (its
        # partition is the task's, and so is a column holding the partition's value,
        # outside the default partition): the gathers move no column that is not written
        drop = [TASK_COL, IS_DELETE_COL, PARTITION_PATH_COL]
        if ctx.partition_value_column and all(t.partition != DEFAULT_PARTITION for t in plan.tasks.values()):
            drop.append(ctx.partition_value_column)
        rows = rows.drop_columns([c for c in drop if c in rows.column_names])

        def run(item: tuple[int, np.ndarray]) -> WriteStat:
            tid, idx = item
            ordered = task_order(rows, idx, short)
            return write_file_group(ctx, plan.tasks[tid], rows.take(pa.array(ordered)),
                                    short=None if short is None else short[ordered])

        return run_tasks(run, groups, self.parallelism)

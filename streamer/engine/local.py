"""Local engine: the core functions on the driver, file groups in a thread pool.

Best for small micro-batches (no job scheduling, no serialization): the batch is one
Arrow table, the key columns the index needs are a zero-copy projection of it, and
file groups are written concurrently (Parquet/gzip encoding and I/O release the GIL).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer import defaults
from streamer.data import to_arrow as batch_to_arrow
from streamer.engine.base import Engine, Prepared
from streamer.table.metadata import WriteStat
from streamer.write.filegroup import OP_COL, WriteContext, write_file_group
from streamer.write.keygen import RECORD_KEY_COL
from streamer.write.plan import OP_DROP, TASK_COL, WritePlan
from streamer.write.prepare import KEY_COLUMNS, PrepareSpec, latest_per_key, prepare_rows


def to_arrow(data: Any) -> pa.Table:
    """Accept an Arrow table/batch, a Spark DataFrame or anything ``pa.table`` takes."""
    return batch_to_arrow(data)


def split_by_task(rows: pa.Table) -> list[tuple[int, pa.Table]]:
    """Group rows by task id with one sort (no per-row Python).

    Within a task the rows come out sorted by record key, which is the order the
    file-group writer needs anyway (it then skips its own sort): one ``take`` of the
    batch instead of two.
    """
    if rows.num_rows == 0:
        return []
    order = [(TASK_COL, "ascending")]
    if RECORD_KEY_COL in rows.column_names:
        order.append((RECORD_KEY_COL, "ascending"))
    rows = rows.take(pc.sort_indices(rows, order))
    tids = rows.column(TASK_COL).to_numpy()
    starts = np.flatnonzero(np.r_[True, tids[1:] != tids[:-1]])
    ends = np.r_[starts[1:], len(tids)]
    return [(int(tids[s]), rows.slice(s, e - s)) for s, e in zip(starts, ends, strict=True)]


class LocalEngine(Engine):
    name = "local"

    def __init__(self, parallelism: int = defaults.LOCAL_THREADS) -> None:
        self.parallelism = max(1, parallelism)

    def prepare(self, data: Any, spec: PrepareSpec, combine: bool) -> Prepared:
        table = to_arrow(data)
        rows = prepare_rows(table, spec)
        if combine:
            rows = latest_per_key(rows, spec.cfg.ordering_field)
        return Prepared(rows.select(list(KEY_COLUMNS)), table.num_rows, rows)

    def write(self, prepared: Prepared, plan: WritePlan, ctx: WriteContext) -> list[WriteStat]:
        rows: pa.Table = prepared.handle
        a = plan.assignment
        rows = rows.append_column(TASK_COL, a.column(TASK_COL)).append_column(OP_COL, a.column(OP_COL))
        dropped = pc.equal(rows.column(OP_COL), OP_DROP)
        if pc.any(dropped).as_py():
            rows = rows.filter(pc.invert(dropped))
        groups = split_by_task(rows)

        def run(item: tuple[int, pa.Table]) -> WriteStat:
            tid, part = item
            return write_file_group(ctx, plan.tasks[tid], part)

        if self.parallelism == 1 or len(groups) <= 1:
            return [run(g) for g in groups]
        with ThreadPoolExecutor(self.parallelism, thread_name_prefix="fg-writer") as ex:
            return list(ex.map(run, groups))

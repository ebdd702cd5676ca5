"""Spark engine: the local engine's core, once per table partition, on executors.

The driver sees write statistics, never keys, and the batch crosses
between the JVM and Python twice, with one shuffle:

* ``mapInArrow(Packer)`` builds keys and conforms the schema (with the bucket index it
  also computes each row's bucket; with a per-partition index, a delete without its
  partition value is copied to each partition holding its key), then packs the rows of
  each table partition (bucket index: of each partition's bucket) into Arrow IPC
  streams: one Spark row per piece, ``(partition path[, bucket], rows)``;
* ``repartition(partition path[, bucket])`` brings every piece of a table partition to
  one Spark task - the unit within which the local engine's planning is self-contained:
  a key's duplicates, its file group and the partition's insert bin-packing never look
  past the partition;
* ``mapInArrow(PartitionWriter)`` unpacks the pieces and runs, per table partition in
  the task, exactly what the local engine runs for the whole batch: combine duplicates,
  look keys up in the partition's slices (the executor reads footers and key columns
  from the table's storage), plan (:func:`~streamer.write.tagging.plan_on_driver`),
  write the file groups (:meth:`LocalEngine.write`) - and returns one Hudi write stat
  per file group plus the task's input row count. The driver commits those.

Why pack: Spark would otherwise turn every record into a JVM row after the first
Python step, shuffle it row by row and turn it back into Arrow for the second - about
half of the engine's JVM CPU at 1M rows (RESULTS.md, "Engines"). Packed, the JVM
routes a few hundred binary values and the records stay columnar end to end.

No cache, no count job, no sort: the planning happens in :meth:`write` (after the
instant is inflight), so :meth:`plan` returns a deferred plan. Because the unit is the
table partition, rows of one partition share a Python worker (as they did when
tagging grouped by partition): a non-partitioned table is written by one task.

``tag_on_executors=False`` keeps the earliest path (keys collected, looked up and
planned on the driver, the plan joined back) for comparison in benchmarks; it refuses
a delete without its partition value that would have to go to another partition.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer import errors
from streamer.data import is_spark_dataframe, to_arrow
from streamer.table.metadata import WriteStat
from streamer.table.naming import write_partition_metadata
from streamer.write.engine.base import Engine, Prepared
from streamer.write.engine.local import LocalEngine
from streamer.write.filegroup import OP_COL, WriteContext, write_file_group
from streamer.write.keygen import PARTITION_PATH_COL, RECORD_KEY_COL
from streamer.write.moves import route_orphan_deletes
from streamer.write.plan import OP_DROP, TASK_COL, WritePlan
from streamer.write.prepare import (
    KEY_COLUMNS,
    PrepareSpec,
    in_types,
    latest_per_key,
    prepare_rows,
    prepared_schema,
)
from streamer.write.tagging import (
    BUCKET_COL,
    BUCKET_COLUMN,
    Planned,
    PlanRequest,
    partition_request,
    plan_on_driver,
    tag_buckets,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

_STAT = "stat"
_ROWS = "rows"
_OUT_SCHEMA = pa.schema([pa.field(_STAT, pa.string()), pa.field(_ROWS, pa.int64())])
_PIECE = "_mor_rows"  # one Arrow IPC stream: prepared rows of one partition (and bucket)
#: Rows a packer holds before it packs them (bounds a Python worker's memory; fewer,
#: larger pieces cost the shuffle less).
PACK_ROWS = 200_000


def _spark_schema(schema: pa.Schema) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


_WORKER_ERROR = re.compile(r"^streamer\.errors\.(\w+): (.*)$", re.MULTILINE)


@contextlib.contextmanager
def _worker_errors() -> Iterator[None]:
    """Our error raised in a Python worker (a corrupt block met while tagging, a refused
    write) reaches the driver as Spark's exception with the worker's traceback as text:
    raise it again as the same :class:`StreamerError`, so callers see one error type
    whichever engine ran."""
    try:
        yield
    except Exception as e:
        found = _WORKER_ERROR.findall(str(e))
        cls = getattr(errors, found[-1][0], None) if found else None
        if isinstance(cls, type) and issubclass(cls, errors.StreamerError):
            raise cls(found[-1][1]) from e
        raise


def _per_batch(fn: Callable[[pa.Table], pa.Table]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``fn(table) -> table`` as a ``mapInArrow`` function."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            yield from fn(pa.Table.from_batches([b])).to_batches()

    return run


def _runs(codes: np.ndarray) -> Iterator[np.ndarray]:
    """Row indices per distinct code, codes ascending, arrival order kept within one."""
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    ends = np.r_[starts[1:], len(order)]
    for s, e in zip(starts, ends, strict=True):
        yield order[s:e]


def _partition_codes(rows: pa.Table) -> np.ndarray:
    enc = pc.dictionary_encode(rows.column(PARTITION_PATH_COL)).combine_chunks()
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _ipc(rows: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rows.schema) as w:
        w.write_table(rows)
    return sink.getvalue().to_pybytes()


def pack(rows: pa.Table, bucketed: bool) -> pa.Table:
    """One row per table partition (``bucketed``: per partition and bucket) of ``rows``:
    the keys the shuffle routes it by and its rows as one Arrow IPC stream, arrival order kept."""
    rows = rows.combine_chunks()  # one copy; gathers from contiguous columns are ~25% cheaper
    codes = _partition_codes(rows)
    if bucketed:
        bucket = rows.column(BUCKET_COL).to_numpy().astype(np.int64)
        codes = codes * (int(bucket.max()) + 1) + bucket
        rows = rows.drop_columns([BUCKET_COL])
    parts, buckets, packed = [], [], []
    for idx in _runs(codes):
        first = int(idx[0])
        parts.append(rows.column(PARTITION_PATH_COL)[first].as_py())
        if bucketed:
            buckets.append(int(bucket[first]))
        packed.append(_ipc(rows.take(pa.array(idx)) if len(idx) < rows.num_rows else rows))
    cols = {PARTITION_PATH_COL: pa.array(parts, pa.string())}
    if bucketed:
        cols[BUCKET_COL] = pa.array(buckets, pa.int32())
    cols[_PIECE] = pa.array(packed, pa.binary())
    return pa.table(cols)


def unpack(pieces: Iterator[pa.RecordBatch]) -> dict[str, list[pa.Table]]:
    """The rows of :func:`pack`'s pieces, by table partition, in the order they came."""
    by_part: dict[str, list[pa.Table]] = {}
    for b in pieces:
        parts = b.column(PARTITION_PATH_COL).to_pylist()
        for part, piece in zip(parts, b.column(_PIECE), strict=True):
            by_part.setdefault(part, []).append(pa.ipc.open_stream(piece.as_buffer()).read_all())
    return by_part


@dataclasses.dataclass(frozen=True)
class Packer:
    """The first Python step (picklable): prepare rows, then pack them per table
    partition (and bucket) into Arrow IPC pieces the shuffle routes without looking inside."""

    spec: PrepareSpec
    bucketed: bool
    #: set where deletes without a partition value are sent to the partitions holding their
    #: keys (:func:`~streamer.write.moves.route_orphan_deletes`): before the shuffle, which
    #: then brings each copy to its partition's task
    orphans: PlanRequest | None = None

    def schema(self) -> pa.Schema:
        fields = [pa.field(PARTITION_PATH_COL, pa.string())]
        if self.bucketed:
            fields.append(BUCKET_COLUMN)
        return pa.schema([*fields, pa.field(_PIECE, pa.binary())])

    def _packed(self, held: list[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = prepare_rows(pa.Table.from_batches(held), self.spec)
        if self.bucketed:
            rows = tag_buckets(rows, self.spec.cfg.index)
        if self.orphans is not None:
            routed = route_orphan_deletes(rows, self.orphans)
            rows = rows if routed is None else routed.rows
        yield from pack(rows, self.bucketed).to_batches()

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # Spark hands Arrow over in batches of 10k rows: prepared and packed together up to
        # PACK_ROWS, one call of the prepare step per 200k rows instead of per 10k
        held: list[pa.RecordBatch] = []
        count = 0
        for b in batches:
            if not b.num_rows:
                continue
            held.append(b)
            count += b.num_rows
            if count >= PACK_ROWS:
                yield from self._packed(held)
                held, count = [], 0
        if held:
            yield from self._packed(held)


@dataclasses.dataclass(frozen=True)
class PartitionWriter:
    """What one Spark task runs (picklable): the local engine, table partition by table
    partition, over the rows the shuffle brought it."""

    request: PlanRequest
    ctx: WriteContext
    ordering: str | None
    combine: bool
    parallelism: int

    def write(self, rows: pa.Table) -> list[WriteStat]:
        """Combine, look up, plan and write ONE table partition's rows (the local
        engine's steps, restricted to the partition's slices)."""
        part = rows.column(PARTITION_PATH_COL)[0].as_py()
        if self.combine:
            rows = latest_per_key(rows, self.ordering)
        keys = rows.select(list(KEY_COLUMNS))
        # the local engine's planning, by this worker, for its partition alone
        plan = plan_on_driver(keys, partition_request(self.request, part, self.parallelism)).plan
        if not plan.tasks:
            return []
        for new_part in plan.new_partitions:
            write_partition_metadata(self.ctx.fs, self.ctx.base_path, new_part, self.ctx.instant)
        return LocalEngine(self.parallelism).write(Prepared(keys, rows.num_rows, rows), plan, self.ctx)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        by_part = unpack(batches)
        if not by_part:
            return
        stats: list[str | None] = [None]  # first: this task's input rows
        rows_in = 0
        for part in sorted(by_part):
            rows = pa.concat_tables(by_part.pop(part))
            rows_in += rows.num_rows
            stats += [json.dumps(s.to_dict()) for s in self.write(rows)]
        counts = [rows_in] + [0] * (len(stats) - 1)
        yield from pa.table([pa.array(stats, pa.string()), pa.array(counts, pa.int64())],
                            schema=_OUT_SCHEMA).to_batches()


def _refuse_unrouted_deletes(prepared: Prepared, request: PlanRequest) -> None:
    """The keys-collected path joins the plan back on key and partition, so a delete sent
    to another partition would match no row and be lost: such a batch is refused instead."""
    if request.op not in ("upsert", "delete") or request.index.is_global or prepared.keys is None:
        return
    routed = route_orphan_deletes(prepared.keys, request)
    if routed is not None:
        raise errors.ConfigError(
            f"SparkEngine(tag_on_executors=False) cannot send a delete without its partition value to "
            f"the partitions holding its key (key {routed.sent[0].as_py()!r}, "
            f"{len(routed.sent)} such deletes): write with tag_on_executors=True (the default) or the local engine")


class SparkEngine(Engine):
    name = "spark"

    def __init__(self, buckets: int | None = None, tag_on_executors: bool = True) -> None:
        self.buckets = buckets
        self.tag_on_executors = tag_on_executors
        self._ordering: str | None = None
        self._combine = False
        self._request: PlanRequest | None = None
        self._packer: Packer | None = None
        self._planned: Planned | None = None

    def _df(self, data: Any, schema: pa.Schema) -> DataFrame:
        """``data`` as a Spark DataFrame; Arrow input first in the commit ``schema``'s types
        (as the local engine writes them), so Spark neither refuses a type it has no
        counterpart of (``uint32``, ``date64``, ``time32``) nor cuts a value short (a
        nanosecond timestamp): a value the table's type cannot hold is the local engine's
        :class:`~streamer.errors.SchemaError`, naming the field."""
        if is_spark_dataframe(data):
            return data
        # the caller's session (the pipeline's, or one already started); the engine does
        # not configure sessions: that is streamer.spark's, a layer above the writer
        from pyspark.sql import SparkSession

        table = in_types(to_arrow(data), list(schema))
        for f in schema:
            if f.name in table.column_names and (
                    pa.types.is_time(f.type) or pa.types.is_decimal(f.type) and f.type.precision > 38):
                raise errors.SchemaError(f"field {f.name!r}: {f.type} has no Spark type (a time of day, or a "
                                         "decimal of more than 38 digits): write this table with the local engine")
        return SparkSession.builder.getOrCreate().createDataFrame(table)

    def _tasks(self, df: DataFrame) -> int:
        """Spark tasks per step: ``buckets``, else the session's shuffle partitions."""
        if self.buckets:
            return self.buckets
        partitions = df.sparkSession.conf.get("spark.sql.shuffle.partitions")
        if partitions is None:  # Spark always has one (200 by default)
            raise errors.EnvironmentSetupError("the Spark session has no spark.sql.shuffle.partitions")
        return int(partitions)

    def prepare(self, data: Any, spec: PrepareSpec, combine: bool) -> Prepared:
        df = self._df(data, spec.schema)
        out_schema = prepared_schema(spec)
        self._ordering = spec.cfg.combine_field
        self._combine = combine
        if not self.tag_on_executors:
            return self._prepare_collect(df, spec, out_schema, combine)
        self._packer = Packer(spec, spec.cfg.index.is_bucket)
        # many small input partitions (an Arrow table handed in is cut every 10k rows) cost
        # a Python round trip each: at most as many as the shuffle has (never more: no shuffle).
        # Packed in write(), once the request says whether deletes are to be routed.
        # Input rows are counted where the rows are written (no count job here).
        return Prepared(None, 0, df.coalesce(self._tasks(df)))

    def plan(self, prepared: Prepared, request: PlanRequest) -> Planned:
        if not self.tag_on_executors:
            _refuse_unrouted_deletes(prepared, request)
            return super().plan(prepared, request)
        self._request = request
        # decided per table partition on executors, once the instant is inflight
        self._planned = Planned(WritePlan({}, None, [], rows=prepared.handle), driver_keys=0)
        return self._planned

    def write(self, prepared: Prepared, plan: WritePlan, ctx: WriteContext) -> list[WriteStat]:
        if not self.tag_on_executors:
            return self._write_collected(prepared, plan, ctx)
        assert self._request is not None and self._packer is not None
        request = self._request
        routes = request.op in ("upsert", "delete") and not request.index.is_global
        packer = dataclasses.replace(self._packer, orphans=request if routes else None)
        rows = plan.rows.mapInArrow(packer, _spark_schema(packer.schema()))
        cols = [PARTITION_PATH_COL, BUCKET_COL] if packer.bucketed else [PARTITION_PATH_COL]
        n = self._tasks(rows)
        # one thread per task: Spark already runs a task per core (threads inside cost
        # ~15% more CPU at 1M rows and gained no wall time on 2 cores)
        fn = PartitionWriter(self._request, ctx, self._ordering, self._combine, 1)
        out = rows.repartition(n, *cols).mapInArrow(fn, _spark_schema(_OUT_SCHEMA))
        with _worker_errors():
            got = out.toArrow()  # one row per file group written, one per task that had rows
        stat_col = got.column(_STAT)
        prepared.input_rows = int(pc.sum(got.column(_ROWS)).as_py() or 0)
        if self._planned is not None:
            self._planned.driver_summary_rows = got.num_rows
        return [WriteStat.from_dict(json.loads(s)) for s in stat_col.drop_null().to_pylist()]

    # ------------------------------------------------------------ keys collected (comparison)
    def _prepare_collect(self, df: DataFrame, spec: PrepareSpec, out_schema: pa.Schema, combine: bool) -> Prepared:
        from pyspark.sql import functions as F

        rows = df.mapInArrow(_per_batch(lambda t: prepare_rows(t, spec)), _spark_schema(out_schema))
        if combine:
            n = self._tasks(df)
            ordering = spec.cfg.combine_field
            bucket = "_mor_bucket"

            def combine_fn(t: pa.Table) -> pa.Table:
                return latest_per_key(t.drop_columns([bucket]), ordering)

            rows = (
                rows.withColumn(bucket, F.pmod(F.hash(RECORD_KEY_COL), F.lit(n)))
                .groupBy(bucket)
                .applyInArrow(combine_fn, _spark_schema(out_schema))
            )
        input_rows = df.count()
        rows = rows.persist()
        keys = rows.select(*KEY_COLUMNS).toArrow()
        keys = keys.cast(pa.schema([out_schema.field(c) for c in KEY_COLUMNS]))
        return Prepared(keys, input_rows, rows)

    def _write_collected(self, prepared: Prepared, plan: WritePlan, ctx: WriteContext) -> list[WriteStat]:
        rows = prepared.handle
        assert plan.assignment is not None
        assignment = plan.assignment.filter(pc.not_equal(plan.assignment.column(OP_COL), OP_DROP))
        if assignment.num_rows == 0:
            return []
        adf = rows.sparkSession.createDataFrame(assignment)
        joined = rows.join(adf, on=[RECORD_KEY_COL, PARTITION_PATH_COL], how="inner")
        tasks = plan.tasks
        stat_schema = pa.schema([pa.field(_STAT, pa.string())])

        def write_group(t: pa.Table) -> pa.Table:
            tid = t.column(TASK_COL)[0].as_py()
            stat = write_file_group(ctx, tasks[tid], t)
            return pa.table({_STAT: [json.dumps(stat.to_dict())]})

        out = joined.groupBy(TASK_COL).applyInArrow(write_group, _spark_schema(stat_schema))
        with _worker_errors():
            collected = out.collect()
        return [WriteStat.from_dict(json.loads(r[_STAT])) for r in collected]

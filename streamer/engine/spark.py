"""Spark engine: the same core functions, on executors; the driver sees counts, not keys.

* ``mapInArrow(prepare_rows)`` builds keys and conforms the schema batch by batch;
* tagging runs on executors (:mod:`streamer.write.tagging`), on the whole rows (no
  join back: a row carries its tag): with the bloom index (or none),
  ``groupBy(partition).applyInArrow`` combines duplicates (a key's rows share its
  partition), looks the partition's keys up at once - the executor reads the footers
  and key columns it needs from the table's storage, the file listing travels in the
  task - and ranks the inserts in key order; with the bucket index,
  ``groupBy(hash).applyInArrow(latest_per_key)`` combines and ``mapInArrow`` hashes each
  key to its bucket. The tagged batch is cached;
* the driver collects counts per (partition, file group, operation) and plans from
  them: the tasks and, per partition, how many inserts each insert bucket takes;
* ``mapInArrow`` gives each row its task from that plan (an insert's rank picks its
  bucket) and ``groupBy(task).applyInArrow(write_file_group)`` writes each file group,
  returning its Hudi write stat as JSON; the driver commits.

``tag_on_executors=False`` keeps the earlier path (keys collected, looked up and
planned on the driver, the plan joined back) for comparison in benchmarks.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from streamer import errors
from streamer.data import is_spark_dataframe, to_arrow
from streamer.engine.base import Engine, Prepared
from streamer.table.metadata import WriteStat
from streamer.write.filegroup import OP_COL, WriteContext, write_file_group
from streamer.write.keygen import PARTITION_PATH_COL, RECORD_KEY_COL
from streamer.write.plan import OP_DROP, TASK_COL, WritePlan
from streamer.write.prepare import (
    IS_DELETE_COL,
    KEY_COLUMNS,
    PrepareSpec,
    latest_per_key,
    prepare_rows,
    prepared_schema,
)
from streamer.write.tagging import (
    ASSIGN_COLUMNS,
    BUCKET_COL,
    BUCKET_COLUMN,
    COUNT_COL,
    FILE_ID_COL,
    TAG_COLUMNS,
    UPSERTS_COL,
    Planned,
    PlanRequest,
    bucket_plan_from_counts,
    lookup_partition,
    plan_from_counts,
    tag_buckets,
    tag_rows,
)

_BUCKET = "_mor_bucket"
_STAT = "stat"


def _spark_schema(schema: pa.Schema):
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


def _with_fields(schema, fields) -> Any:
    """A Spark schema plus Arrow ``fields`` (what a tagging step appends)."""
    from pyspark.sql.types import StructType

    return StructType(list(schema.fields) + list(_spark_schema(pa.schema(list(fields))).fields))


def _per_batch(fn):
    """``fn(table) -> table`` as a ``mapInArrow`` function."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            yield from fn(pa.Table.from_batches([b])).to_batches()

    return run


class SparkEngine(Engine):
    name = "spark"

    def __init__(self, buckets: int | None = None, tag_on_executors: bool = True) -> None:
        self.buckets = buckets
        self.tag_on_executors = tag_on_executors
        self._ordering: str | None = None
        self._combine = False  # duplicates still to combine while tagging

    def _df(self, data: Any):
        if is_spark_dataframe(data):
            return data
        from streamer.spark import get_spark

        return get_spark().createDataFrame(to_arrow(data))

    def prepare(self, data: Any, spec: PrepareSpec, combine: bool) -> Prepared:
        from pyspark.sql import functions as F

        df = self._df(data)
        out_schema = prepared_schema(spec)
        rows = df.mapInArrow(_per_batch(lambda t: prepare_rows(t, spec)), _spark_schema(out_schema))
        self._ordering = spec.cfg.ordering_field
        # with the bloom index duplicates are combined where the partition is tagged
        self._combine = combine and self.tag_on_executors and not spec.cfg.index.is_bucket
        if combine and not self._combine:
            n = self.buckets or int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
            ordering = spec.cfg.ordering_field

            def combine_fn(t: pa.Table) -> pa.Table:
                return latest_per_key(t.drop_columns([_BUCKET]), ordering)

            rows = (
                rows.withColumn(_BUCKET, F.pmod(F.hash(RECORD_KEY_COL), F.lit(n)))
                .groupBy(_BUCKET)
                .applyInArrow(combine_fn, _spark_schema(out_schema))
            )
        input_rows = df.count()
        if self.tag_on_executors:
            return Prepared(None, input_rows, rows)  # cached once tagged
        rows = rows.persist()
        keys = rows.select(*KEY_COLUMNS).toArrow()
        keys = keys.cast(pa.schema([out_schema.field(c) for c in KEY_COLUMNS]))
        return Prepared(keys, input_rows, rows)

    def plan(self, prepared: Prepared, request: PlanRequest) -> Planned:
        if not self.tag_on_executors:
            return super().plan(prepared, request)
        from pyspark.sql import functions as F

        rows = prepared.handle
        schema = rows.schema
        if request.index.is_bucket:
            index = request.index
            tagged = rows.mapInArrow(_per_batch(lambda t: tag_buckets(t, index)),
                                     _with_fields(schema, [BUCKET_COLUMN])).persist()
            prepared.cached.append(tagged)
            with _worker_errors():
                counts = tagged.groupBy(PARTITION_PATH_COL, BUCKET_COL).agg(
                    F.count(F.lit(1)).alias(COUNT_COL),
                    F.sum(F.when(F.col(IS_DELETE_COL), 0).otherwise(1)).cast("long").alias(UPSERTS_COL),
                ).toArrow()
            cplan = bucket_plan_from_counts(counts, request)
        else:
            ordering, combine = self._ordering, self._combine

            def tag(t: pa.Table) -> pa.Table:
                if combine:
                    t = latest_per_key(t, ordering)
                return tag_rows(t, lookup_partition(t, request))

            tagged = rows.groupBy(PARTITION_PATH_COL).applyInArrow(
                tag, _with_fields(schema, TAG_COLUMNS)).persist()  # looked up once
            prepared.cached.append(tagged)
            with _worker_errors():
                counts = tagged.groupBy(PARTITION_PATH_COL, FILE_ID_COL, OP_COL).count().toArrow()
            cplan = plan_from_counts(counts, request)
        assigned = tagged.mapInArrow(_per_batch(cplan.assign), _with_fields(schema, ASSIGN_COLUMNS))
        return Planned(cplan.write_plan(assigned), driver_keys=0, driver_summary_rows=counts.num_rows)

    def write(self, prepared: Prepared, plan: WritePlan, ctx: WriteContext) -> list[WriteStat]:
        rows = prepared.handle
        if plan.rows is not None:
            joined = plan.rows
        else:
            assert plan.assignment is not None
            assignment = plan.assignment.filter(
                pa.compute.not_equal(plan.assignment.column(OP_COL), OP_DROP)
            )
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

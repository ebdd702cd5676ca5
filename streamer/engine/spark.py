"""Spark engine: the same core functions, on executors; the driver sees counts, not keys.

* ``mapInArrow(prepare_rows)`` builds keys and conforms the schema batch by batch;
* ``groupBy(bucket).applyInArrow(latest_per_key)`` combines duplicates (a key's rows
  all hash to one bucket); each row gets an id and the batch is cached;
* tagging runs on executors (:mod:`streamer.write.tagging`): the bloom index looks a
  whole partition's keys up at once (``groupBy(partition).applyInArrow``: the executor
  reads the footers and key columns it needs from the table's storage; the file
  listing travels in the task), or the bucket index hashes each key (``mapInArrow``);
* the driver collects counts per (partition, file group, operation) and plans from
  them: the tasks and, per partition, how many inserts each insert bucket takes;
* executors turn the plan into each row's task (an insert's rank in its partition's
  key order picks its bucket), the rows are joined to it by id and
  ``groupBy(task).applyInArrow(write_file_group)`` writes each file group, returning
  its Hudi write stat as JSON; the driver commits.

``tag_on_executors=False`` keeps the earlier path (keys collected, looked up and
planned on the driver) for comparison in benchmarks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

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
    ASSIGN_SCHEMA,
    BUCKET_COL,
    BUCKET_TAG_SCHEMA,
    COUNT_COL,
    FILE_ID_COL,
    ROW_COL,
    TAG_SCHEMA,
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

    def _df(self, data: Any):
        if is_spark_dataframe(data):
            return data
        from streamer.spark import get_spark

        return get_spark().createDataFrame(to_arrow(data))

    def prepare(self, data: Any, spec: PrepareSpec, combine: bool) -> Prepared:
        from pyspark.sql import functions as F

        df = self._df(data)
        out_schema = prepared_schema(spec)

        def prep(t: pa.Table) -> pa.Table:
            return prepare_rows(t, spec)

        rows = df.mapInArrow(_per_batch(prep), _spark_schema(out_schema))
        if combine:
            n = self.buckets or int(df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
            ordering = spec.cfg.ordering_field

            def combine_fn(t: pa.Table) -> pa.Table:
                return latest_per_key(t.drop_columns([_BUCKET]), ordering)

            rows = (
                rows.withColumn(_BUCKET, F.pmod(F.hash(RECORD_KEY_COL), F.lit(n)))
                .groupBy(_BUCKET)
                .applyInArrow(combine_fn, _spark_schema(out_schema))
            )
        # the id the plan is joined back by (keys may repeat in an uncombined insert);
        # fixed once the batch is cached
        rows = rows.withColumn(ROW_COL, F.monotonically_increasing_id()).persist()
        input_rows = df.count()
        keys = None
        if not self.tag_on_executors:
            keys = rows.select(*KEY_COLUMNS).toArrow()
            keys = keys.cast(pa.schema([out_schema.field(c) for c in KEY_COLUMNS]))
        return Prepared(keys, input_rows, rows)

    def plan(self, prepared: Prepared, request: PlanRequest) -> Planned:
        if not self.tag_on_executors:
            return super().plan(prepared, request)
        from pyspark.sql import functions as F

        keys = prepared.handle.select(ROW_COL, RECORD_KEY_COL, PARTITION_PATH_COL, IS_DELETE_COL)
        if request.index.is_bucket:
            index = request.index
            tagged = keys.mapInArrow(_per_batch(lambda t: tag_buckets(t, index)),
                                     _spark_schema(BUCKET_TAG_SCHEMA))
            counts = tagged.groupBy(PARTITION_PATH_COL, BUCKET_COL).agg(
                F.count(F.lit(1)).alias(COUNT_COL),
                F.sum(F.when(F.col(IS_DELETE_COL), 0).otherwise(1)).cast("long").alias(UPSERTS_COL),
            ).toArrow()
            cplan = bucket_plan_from_counts(counts, request)
        else:
            def tag(t: pa.Table) -> pa.Table:
                return tag_rows(t, lookup_partition(t, request))

            tagged = keys.groupBy(PARTITION_PATH_COL).applyInArrow(tag, _spark_schema(TAG_SCHEMA))
            tagged = tagged.persist()  # looked up once: counted, then assigned
            prepared.cached.append(tagged)
            counts = tagged.groupBy(PARTITION_PATH_COL, FILE_ID_COL, OP_COL).count().toArrow()
            cplan = plan_from_counts(counts, request)
        assigned = tagged.mapInArrow(_per_batch(cplan.assign), _spark_schema(ASSIGN_SCHEMA))
        return Planned(cplan.write_plan(assigned), driver_keys=0, driver_summary_rows=counts.num_rows)

    def write(self, prepared: Prepared, plan: WritePlan, ctx: WriteContext) -> list[WriteStat]:
        rows = prepared.handle
        if plan.rows is not None:
            joined = rows.join(plan.rows, on=ROW_COL, how="inner")
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
        return [WriteStat.from_dict(json.loads(r[_STAT])) for r in out.collect()]

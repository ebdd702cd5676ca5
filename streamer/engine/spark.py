"""Spark engine: the same core functions, on executors.

* ``mapInArrow(prepare_rows)`` builds keys and conforms the schema batch by batch;
* ``groupBy(bucket).applyInArrow(latest_per_key)`` combines duplicates (a key's rows
  all hash to one bucket);
* the driver collects only the key columns for the index and routing;
* the assignment (key → task, op) is joined back and
  ``groupBy(task).applyInArrow(write_file_group)`` writes each file group on an
  executor, returning its Hudi write stat as JSON; the driver commits.
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
    KEY_COLUMNS,
    PrepareSpec,
    latest_per_key,
    prepare_rows,
    prepared_schema,
)

_BUCKET = "_mor_bucket"
_STAT = "stat"


def _spark_schema(schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


class SparkEngine(Engine):
    name = "spark"

    def __init__(self, buckets: int | None = None) -> None:
        self.buckets = buckets

    def _df(self, data: Any):
        if is_spark_dataframe(data):
            return data
        from streamer.spark import get_spark

        return get_spark().createDataFrame(to_arrow(data))

    def prepare(self, data: Any, spec: PrepareSpec, combine: bool) -> Prepared:
        from pyspark.sql import functions as F

        df = self._df(data)
        out_schema = prepared_schema(spec)

        def prep(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            for b in batches:
                yield from prepare_rows(pa.Table.from_batches([b]), spec).to_batches()

        rows = df.mapInArrow(prep, _spark_schema(out_schema))
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
        rows = rows.persist()
        input_rows = df.count()
        keys = rows.select(*KEY_COLUMNS).toArrow()
        keys = keys.cast(pa.schema([out_schema.field(c) for c in KEY_COLUMNS]))
        return Prepared(keys, input_rows, rows)

    def write(self, prepared: Prepared, plan: WritePlan, ctx: WriteContext) -> list[WriteStat]:
        rows = prepared.handle
        spark = rows.sparkSession
        assignment = plan.assignment.filter(
            pa.compute.not_equal(plan.assignment.column(OP_COL), OP_DROP)
        )
        if assignment.num_rows == 0:
            return []
        adf = spark.createDataFrame(assignment)
        joined = rows.join(adf, on=[RECORD_KEY_COL, PARTITION_PATH_COL], how="inner")
        tasks = plan.tasks
        stat_schema = pa.schema([pa.field(_STAT, pa.string())])

        def write_group(t: pa.Table) -> pa.Table:
            tid = t.column(TASK_COL)[0].as_py()
            stat = write_file_group(ctx, tasks[tid], t)
            return pa.table({_STAT: [json.dumps(stat.to_dict())]})

        out = joined.groupBy(TASK_COL).applyInArrow(write_group, _spark_schema(stat_schema))
        return [WriteStat.from_dict(json.loads(r[_STAT])) for r in out.collect()]

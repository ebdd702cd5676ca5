"""Bad records: split them off, and keep them in a table of their own.

A record that cannot be keyed (null or missing record-key field, null ordering
value) must not fail the batch nor vanish: it goes to the pipeline's error table
with the reason and its payload. The error table is itself a mor-streamer (Hudi MOR)
table, keyed by a hash of the record's source position and reason, so a replayed
batch upserts the same error rows instead of duplicating them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sources.base import ERROR_COLUMNS
from streamer.config.pipeline import EngineConfig
from streamer.config.target import TargetConfig
from streamer.pipeline.sink import TableSink
from streamer.write.result import CommitResult

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

ERROR_ID = "error_id"
_KAFKA_META = ("_kafka_topic", "_kafka_partition", "_kafka_offset")


def split_unkeyable(
    df: DataFrame, target: TargetConfig, source_type: str, position_json: str
) -> tuple[DataFrame, DataFrame]:
    """(good rows, error rows) where error rows lack a record key or ordering value.

    A key field missing from the batch altogether makes every row an error (named
    in the reason), rather than an exception that would stop a streaming pipeline.
    """
    from pyspark.sql import functions as F

    columns = set(df.columns)
    needed = [(f, "record key field") for f in target.record_key]
    if target.ordering_field:
        needed.append((target.ordering_field, "ordering field"))
    reason: Column | None = None
    for name, what in needed:
        if name not in columns:
            cond, text = F.lit(True), f"{what} '{name}' is not in the record (columns: {sorted(columns)})"
        else:
            col = F.col(f"`{name}`")
            cond = col.isNull()
            if what == "record key field":
                cond = cond | (F.trim(col.cast("string")) == F.lit(""))
            text = f"{what} '{name}' is null or empty"
        reason = F.when(cond, F.lit(text)) if reason is None else reason.when(cond, F.lit(text))
    if reason is None:
        return df, df.limit(0).select(*[F.lit(None).alias(c) for c in ERROR_COLUMNS])
    flagged = df.withColumn("_mor_reason", reason)
    good = flagged.where(F.col("_mor_reason").isNull()).drop("_mor_reason")
    bad_rows = flagged.where(F.col("_mor_reason").isNotNull())
    payload_cols = [F.col(f"`{c}`") for c in df.columns]

    def meta(name: str, spark_type: str) -> Column:
        return F.col(name).cast(spark_type) if name in columns else F.lit(None).cast(spark_type)

    bad = bad_rows.select(
        F.lit(source_type).alias("source_type"),
        F.lit(position_json).alias("source_position"),
        meta(_KAFKA_META[0], "string").alias("topic"),
        meta(_KAFKA_META[1], "int").alias("partition"),
        meta(_KAFKA_META[2], "bigint").alias("offset"),
        F.lit(None).cast("string").alias("file"),
        F.to_json(F.struct(*payload_cols)).alias("raw_payload"),
        F.lit("json").alias("payload_encoding"),
        F.col("_mor_reason").alias("reason"),
        F.current_timestamp().alias("error_time"),
    )
    return good, bad


def with_error_ids(errors: DataFrame) -> DataFrame:
    """Deterministic ids: the same bad record in a replayed batch gets the same id."""
    from pyspark.sql import functions as F

    parts = [
        F.coalesce(F.col(c).cast("string"), F.lit(""))
        for c in ("source_type", "source_position", "topic", "partition", "offset", "file", "reason", "raw_payload")
    ]
    return errors.select(F.sha2(F.concat_ws("\u0001", *parts), 256).alias(ERROR_ID), *ERROR_COLUMNS)


class ErrorTable:
    """The error table of one pipeline (non-partitioned, keyed by :data:`ERROR_ID`)."""

    def __init__(self, path: str, pipeline_name: str) -> None:
        target = TargetConfig(
            path=path,
            record_key=[ERROR_ID],
            partition_by=[],
            table_name=f"{pipeline_name.replace('-', '_')}_errors",
        )
        self.sink = TableSink(target, EngineConfig(mode="local"))

    def write(self, errors: DataFrame, extra_metadata: dict[str, str]) -> CommitResult:
        rows = with_error_ids(errors).toArrow()
        return self.sink.writer(rows.schema).upsert(rows, extra_metadata=extra_metadata, engine="local")

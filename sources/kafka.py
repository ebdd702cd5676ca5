"""Kafka topic → batches of parsed records, JSON or Confluent Avro.

Batch mode (``trigger: once``, and every batch of a run-once loop): the driver asks
the broker for watermarks, plans explicit end offsets (capped by
``max_records_per_batch``) and reads exactly ``[start, end)`` with
``spark.read.format("kafka")``. The end offsets are the position the runner stores
in the commit, so a replay reads the very same records.

Continuous mode: :meth:`KafkaSource.stream` builds the ``readStream`` and
:meth:`KafkaSource.batch_from_raw` decodes each micro-batch handed to ``foreachBatch``.

Decoding never fails a batch on bad data: unparsable payloads become error rows
(topic/partition/offset, raw payload, reason) for the error table.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from sources.base import ERROR_COLUMNS, Batch
from sources.kafka_options import fetch_watermarks, plan_end, resolve_start, spark_kafka_options
from sources.position import KafkaOffsets, Position
from streamer.config.sources import KafkaSourceConfig
from streamer.errors import SourceError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

CORRUPT_COLUMN = "_corrupt_record"
RAW_KAFKA_DDL = (
    "key BINARY, value BINARY, topic STRING, `partition` INT, `offset` BIGINT, "
    "timestamp TIMESTAMP, timestampType INT"
)
METADATA_COLUMNS = {
    "_kafka_topic": "topic",
    "_kafka_partition": "partition",
    "_kafka_offset": "offset",
    "_kafka_timestamp": "timestamp",
}


class KafkaSource:
    """:class:`~sources.base.StreamingSource` over one topic; position = :class:`KafkaOffsets`."""

    source_type = "kafka"

    def __init__(self, config: KafkaSourceConfig) -> None:
        self.config = config
        self._avro = None
        if config.format == "avro":
            from sources.kafka_avro import AvroDecoder

            self._avro = AvroDecoder.from_config(config)

    def initial_position(self) -> None:
        """Resolved against the broker on the first read (``starting_offsets``)."""
        return None

    def _check(self, start: Position | None) -> KafkaOffsets | None:
        if start is not None and not isinstance(start, KafkaOffsets):
            raise SourceError(f"kafka source cannot resume from a {start.kind!r} position")
        return start

    # -- batch ------------------------------------------------------------------------------

    def plan(self, start: Position | None) -> tuple[KafkaOffsets, KafkaOffsets]:
        """Concrete ``(start, end)`` offsets of the next batch (asks the broker)."""
        low, high = fetch_watermarks(self.config)
        begin = resolve_start(self.config, self._check(start), low, high)
        return begin, plan_end(begin, high, self.config.max_records_per_batch)

    def read_raw(self, spark: SparkSession, begin: KafkaOffsets, end: KafkaOffsets) -> DataFrame:
        """The raw Kafka rows of ``[begin, end)`` (key, value, topic, partition, offset, ...)."""
        if begin == end:
            return spark.createDataFrame([], RAW_KAFKA_DDL)
        return (
            spark.read.format("kafka")
            .options(**spark_kafka_options(self.config))
            .option("assign", json.dumps({self.config.topic: sorted(end.partitions)}))
            .option("startingOffsets", begin.spark_json())
            .option("endingOffsets", end.spark_json())
            .option("failOnDataLoss", str(self.config.fail_on_data_loss).lower())
            .load()
        )

    def read_batch(self, spark: SparkSession, start: Position | None) -> Batch:
        begin, end = self.plan(start)
        log.info("kafka %s: reading %d offset(s) %s", self.config.topic, begin.records_until(end), end.partitions)
        good, bad, cached = self.decode(spark, self.read_raw(spark, begin, end))
        # A batch that starts from "no position" reports the resolved start, so has_new_data works.
        return Batch(df=good, errors=bad, start=start if start is not None else begin, end=end, cached=cached)

    # -- continuous -------------------------------------------------------------------------

    def stream(self, spark: SparkSession, start: Position | None = None) -> DataFrame:
        """``readStream`` of raw Kafka rows, starting at ``start`` (else ``starting_offsets``).

        Spark's own checkpoint takes precedence over ``startingOffsets`` once it exists.
        """
        start = self._check(start)
        so = self.config.starting_offsets
        if start is not None:
            starting = start.spark_json()
        elif isinstance(so, dict):
            starting = KafkaOffsets(topic=self.config.topic, partitions=so).spark_json()
        else:
            starting = so
        reader = (
            spark.readStream.format("kafka")
            .options(**spark_kafka_options(self.config))
            .option("subscribe", self.config.topic)
            .option("startingOffsets", starting)
            .option("failOnDataLoss", str(self.config.fail_on_data_loss).lower())
        )
        if self.config.max_records_per_batch is not None:
            reader = reader.option("maxOffsetsPerTrigger", str(self.config.max_records_per_batch))
        return reader.load()

    def batch_from_raw(self, raw: DataFrame, start: Position | None) -> Batch:
        """Decode a ``foreachBatch`` micro-batch; ``end`` = last offset seen + 1 per partition."""
        from pyspark.sql import functions as F

        start = self._check(start)
        good, bad, cached = self.decode(raw.sparkSession, raw)
        source = cached[0] if cached else raw
        rows = source.groupBy("partition").agg(F.max("offset").alias("last")).collect()
        offsets = dict(start.partitions) if start is not None else {}
        for r in rows:
            offsets[int(r["partition"])] = max(offsets.get(int(r["partition"]), 0), int(r["last"]) + 1)
        end = KafkaOffsets(topic=self.config.topic, partitions=offsets)
        return Batch(df=good, errors=bad, start=start, end=end, cached=cached)

    # -- decoding ---------------------------------------------------------------------------

    def decode(self, spark: SparkSession, raw: DataFrame) -> tuple[DataFrame, DataFrame, tuple[DataFrame, ...]]:
        """Raw Kafka rows → (good records, error rows, cached frames to release)."""
        if self._avro is not None:
            return self._avro.decode(spark, raw)
        return decode_json(spark, raw, self.config)


def decode_json(
    spark: SparkSession, raw: DataFrame, config: KafkaSourceConfig
) -> tuple[DataFrame, DataFrame, tuple[DataFrame, ...]]:
    """Parse JSON payloads with ``from_json`` (PERMISSIVE + corrupt-record column).

    The schema is ``config.schema`` (Spark DDL) or inferred from up to
    ``infer_sample_records`` payloads of this batch.
    """
    from pyspark.sql import functions as F

    text = F.col("value").cast("string")
    ddl = config.schema_ddl
    if ddl is None:
        ddl = infer_json_ddl(spark, raw, config.infer_sample_records)
    if ddl is None:  # nothing to infer from: no good records, only (possible) null payloads
        ddl = "value STRING"
    schema = f"{ddl}, {CORRUPT_COLUMN} STRING"
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
    parsed = raw.select(
        "topic", "partition", "offset", "timestamp",
        text.alias("_raw"),
        F.from_json(text, schema, opts).alias("_p"),
    ).cache()
    reason = F.when(F.col("_raw").isNull(), F.lit("null payload (tombstone)"))
    limit = config.max_record_bytes
    if limit is not None:
        size = F.octet_length(F.col("_raw"))
        reason = reason.when(
            size > F.lit(int(limit)),
            F.format_string(f"record of %d bytes exceeds source.max_record_bytes ({int(limit)})", size),
        )
    reason = reason.when(
        F.col("_p").isNull() | F.col(f"_p.{CORRUPT_COLUMN}").isNotNull(),
        F.lit("malformed JSON, or values that do not match the schema's types"),
    )
    flagged = parsed.withColumn("_reason", reason)
    good = flagged.where(F.col("_reason").isNull()).select(
        *[F.col(f"_p.`{c}`").alias(c) for c in _ddl_columns(spark, ddl)],
        *_metadata_columns(config),
    )
    bad = kafka_errors(flagged.where(F.col("_reason").isNotNull()), F.col("_raw"), "utf-8", F.col("_reason"))
    return good, bad, (parsed,)


def infer_json_ddl(spark: SparkSession, raw: DataFrame, sample: int) -> str | None:
    """Spark's JSON schema inference over a sample of payloads (None if there are none)."""
    from pyspark.sql import functions as F

    texts = raw.where(F.col("value").isNotNull()).select(F.col("value").cast("string").alias("v")).limit(sample)
    inferred = spark.read.option("mode", "DROPMALFORMED").json(texts.rdd.map(lambda r: r.v))
    fields = [f for f in inferred.schema.fields if f.name != CORRUPT_COLUMN]
    if not fields:
        return None
    return ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in fields)


def _ddl_columns(spark: SparkSession, ddl: str) -> list[str]:
    from pyspark.sql.types import StructType

    return [f.name for f in StructType.fromDDL(ddl).fields]


def _metadata_columns(config: KafkaSourceConfig) -> list[Column]:
    from pyspark.sql import functions as F

    if not config.include_metadata:
        return []
    return [F.col(src).alias(name) for name, src in METADATA_COLUMNS.items()]


def kafka_errors(rows: DataFrame, payload: Column, encoding: str, reason: Column) -> DataFrame:
    """Error rows in :data:`~sources.base.ERROR_COLUMNS` layout from raw Kafka rows."""
    from pyspark.sql import functions as F

    out = rows.select(
        F.lit("kafka").alias("source_type"),
        F.concat_ws("/", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string")).alias(
            "source_position"
        ),
        F.col("topic").cast("string").alias("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("bigint").alias("offset"),
        F.lit(None).cast("string").alias("file"),
        payload.cast("string").alias("raw_payload"),
        F.lit(encoding).alias("payload_encoding"),
        reason.cast("string").alias("reason"),
        F.current_timestamp().alias("error_time"),
    )
    return out.select(*ERROR_COLUMNS)

"""What a Kafka record carries besides its value: its metadata columns and error rows.

Shared by the JSON and the Avro decoding (:mod:`streamer.sources.kafka.source`, :mod:`streamer.sources.kafka.avro`):
a record's topic, partition and offset identify it in the table's metadata columns and in
the error table alike, so a bad record's error row names exactly where to find it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamer.sources.base import ERROR_COLUMNS, unstamped_error_time

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: The metadata columns a pipeline with ``include_metadata`` adds, and the Kafka field of each.
METADATA_COLUMNS = {
    "_kafka_topic": "topic",
    "_kafka_partition": "partition",
    "_kafka_offset": "offset",
    "_kafka_timestamp": "timestamp",
}


def kafka_errors(rows: DataFrame, payload: Column, encoding: str | Column, reason: Column) -> DataFrame:
    """Error rows in :data:`~streamer.sources.base.ERROR_COLUMNS` layout from raw Kafka rows."""
    return rows.select(*error_columns(payload, encoding, reason))


def error_columns(payload: Column, encoding: str | Column, reason: Column) -> list[Column]:
    from pyspark.sql import functions as F

    if isinstance(encoding, str):
        encoding = F.lit(encoding)
    columns = {
        "source_type": F.lit("kafka"),
        "source_position": F.concat_ws(
            "/", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string")),
        "topic": F.col("topic").cast("string"),
        "partition": F.col("partition").cast("int"),
        "offset": F.col("offset").cast("bigint"),
        "file": F.lit(None).cast("string"),
        "raw_payload": payload.cast("string"),
        "payload_encoding": encoding,
        "reason": reason.cast("string"),
        "error_time": unstamped_error_time(),
    }
    return [columns[name].alias(name) for name in ERROR_COLUMNS]

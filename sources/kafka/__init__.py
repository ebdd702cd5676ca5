"""The Kafka source: a topic read in batches of explicit offsets, JSON or Confluent Avro.

:class:`KafkaSource` is the entry (:func:`streamer.sources.build_source` makes one from a
``type: kafka`` source config). The pieces it is made of:

- :mod:`~streamer.sources.kafka.source`: :class:`KafkaSource`, batch and continuous
  reads, the JSON decode in Spark;
- :mod:`~streamer.sources.kafka.client`: the driver's one quiet librdkafka client
  (watermarks, lag, consumer-group commits);
- :mod:`~streamer.sources.kafka.settings`: the settings both clients (Spark's connector
  and librdkafka) are given, credentials redacted;
- :mod:`~streamer.sources.kafka.offsets`: offset planning, a batch's start and end;
- :mod:`~streamer.sources.kafka.driver_json`: a clean JSON batch decoded on the driver;
- :mod:`~streamer.sources.kafka.avro`: Confluent-framed Avro decoded on the executors;
- :mod:`~streamer.sources.kafka.records`: a record's identity (topic, partition,
  offset) in the metadata columns and the error rows.
"""

from __future__ import annotations

from streamer.sources.kafka.source import DRIVER_RETRY_AFTER, RAW_KAFKA_DDL, KafkaSource

__all__ = ["DRIVER_RETRY_AFTER", "RAW_KAFKA_DDL", "KafkaSource"]

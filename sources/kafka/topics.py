"""The topics a ``topic_pattern`` names, and the primary key their message keys carry.

A Debezium connector publishes each table's changes to its own topic
(``<prefix>.<schema>.<table>``) with the row's primary key as the message key: ``{"id":
42}``, or ``{"schema": ..., "payload": {"id": 42}}`` when Kafka Connect's JSON converter
embeds schemas, or an Avro record whose schema is registered under ``<topic>-key``. So
the topics of a whole database are found by listing the broker's topics, and each
table's record key by reading its first keyed message. A table without a primary key
has null message keys (Debezium has nothing to key it by): :func:`key_fields` says so
with None, and the caller refuses that table by name.
"""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any

from streamer.errors import SourceError
from streamer.sources.kafka.client import QuietClientLog, quiet_settings
from streamer.sources.kafka.settings import librdkafka_config

if TYPE_CHECKING:
    from streamer.config.sources import KafkaSourceConfig

#: How many records of a topic are looked at for a key before it counts as keyless.
KEY_SAMPLE = 20


def _consumer(config: KafkaSourceConfig) -> tuple[Any, QuietClientLog]:
    from confluent_kafka import Consumer

    sink = QuietClientLog()
    conf: dict[str, Any] = dict(librdkafka_config(config))
    conf.update(quiet_settings(sink))
    return Consumer(conf), sink


def matching_topics(config: KafkaSourceConfig) -> list[str]:
    """The broker's topics whose whole name matches ``config.topic_pattern``, sorted
    (Kafka's internal ``__`` topics never match)."""
    assert config.topic_pattern is not None
    pattern = re.compile(config.topic_pattern)
    consumer, sink = _consumer(config)
    try:
        md = consumer.list_topics(timeout=config.metadata_timeout.total_seconds())
    except Exception as e:
        cause = f" ({sink.last_error})" if sink.last_error else ""
        raise SourceError(f"cannot list the topics at {config.bootstrap_servers}: {e}{cause}") from e
    finally:
        consumer.close()
    return sorted(t for t in md.topics if not t.startswith("__") and pattern.fullmatch(t))


def key_fields(config: KafkaSourceConfig, topic: str, timeout_s: float = 10.0) -> list[str] | None:
    """The field names of ``topic``'s message keys (its table's primary key), from its
    first records; None when they have no key (a table without a primary key).

    Raises :class:`SourceError` when the topic has no record yet, or a key that is
    neither a JSON object nor a registered Avro record.
    """
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer, sink = _consumer(config)
    try:
        md = consumer.list_topics(topic, timeout=config.metadata_timeout.total_seconds())
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise SourceError(f"topic {topic!r}: not readable ({meta.error if meta else 'no such topic'})")
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(meta.partitions)])
        deadline = time.monotonic() + timeout_s
        seen = 0
        while seen < KEY_SAMPLE and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            seen += 1
            if msg.key() is not None:
                return _fields(config, topic, msg.key())
        if seen == 0:
            raise SourceError(f"topic {topic!r}: no record yet to learn its key from")
        return None
    finally:
        consumer.close()


def _fields(config: KafkaSourceConfig, topic: str, key: bytes) -> list[str]:
    if config.format == "avro":
        return _avro_key_fields(config, topic)
    try:
        value = json.loads(key)
    except ValueError as e:
        raise SourceError(f"topic {topic!r}: message key is not JSON ({e}); name the table's "
                          "record_key under tables:") from e
    if isinstance(value, dict) and set(value) == {"schema", "payload"} and isinstance(value["payload"], dict):
        value = value["payload"]
    if not isinstance(value, dict) or not value:
        raise SourceError(f"topic {topic!r}: message key {key[:100]!r} is not a JSON object of key fields")
    return list(value)


def _avro_key_fields(config: KafkaSourceConfig, topic: str) -> list[str]:
    from streamer.sources.kafka.avro import RegistrySchemas

    registry = config.schema_registry
    if registry is None:
        raise SourceError(f"topic {topic!r}: Avro keys need schema_registry to learn the key fields")
    schema = RegistrySchemas(registry).latest(f"{topic}-key")
    if schema is None:
        raise SourceError(f"topic {topic!r}: no key schema registered under {topic}-key")
    parsed = json.loads(schema)
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise SourceError(f"topic {topic!r}: the key schema is not an Avro record")
    return [f["name"] for f in parsed["fields"]]

"""The topics a ``topic_pattern`` names, and the primary key their message keys carry.

A Debezium connector publishes each table's changes to its own topic
(``<prefix>.<schema>.<table>``) with the row's primary key as the message key: ``{"id":
42}``, or ``{"schema": ..., "payload": {"id": 42}}`` when Kafka Connect's JSON converter
embeds schemas, or an Avro record whose schema is registered under ``<topic>-key``. So
the topics of a whole database are found by listing the broker's topics, and each
table's record key by reading its newest keyed message. A table without a primary key
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
    newest records; None when they have no key (a table without a primary key).

    The newest, not the first: a primary key changed in the database (``(id)`` to
    ``(id, region)``) keys every later message by the new fields, and a table keyed by the
    old ones would merge rows the database keeps apart. An existing table keyed otherwise
    is then refused by name when its pipeline opens it (``target.record_key``).

    Raises :class:`SourceError` when the topic has no record yet, or a key that is
    neither a JSON object nor a registered Avro record.
    """
    from confluent_kafka import TopicPartition

    consumer, sink = _consumer(config)
    try:
        md = consumer.list_topics(topic, timeout=config.metadata_timeout.total_seconds())
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise SourceError(f"topic {topic!r}: not readable ({meta.error if meta else 'no such topic'})")
        wait = config.metadata_timeout.total_seconds()
        starts, ends = {}, {}
        for p in sorted(meta.partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=wait)
            if high > low:
                starts[p], ends[p] = max(low, high - KEY_SAMPLE), high
        if not starts:
            raise SourceError(f"topic {topic!r}: no record yet to learn its key from")
        newest = _newest_key(consumer, topic, starts, ends, time.monotonic() + timeout_s)
        return None if newest is None else _fields(config, topic, newest)
    finally:
        consumer.close()


def _newest_key(consumer: Any, topic: str, starts: dict[int, int], ends: dict[int, int],
                deadline: float) -> bytes | None:
    """The key of the newest keyed message among each partition's last ``KEY_SAMPLE``
    (by message timestamp, then offset), or None when none of them has a key."""
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
    left = set(starts)
    newest: tuple[int, int, bytes] | None = None
    while left and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None or msg.error() is not None:
            continue
        if msg.offset() >= ends[msg.partition()] - 1:
            left.discard(msg.partition())
        if msg.key() is not None:
            seen = (msg.timestamp()[1], msg.offset(), msg.key())
            newest = seen if newest is None or seen[:2] > newest[:2] else newest
    return None if newest is None else newest[2]


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

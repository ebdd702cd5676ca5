"""MySQL-family change capture for the tests: a MariaDB database captured by Debezium's
binlog connector, the one-table pipeline of a change topic, and the topic's events as
Debezium sent them (to check what a test claims about positions and timestamps)."""

from __future__ import annotations

import time
from typing import Any


def capture_binlog(mariadb: Any, connect: Any, kafka: Any, *, db: str, prefix: str, setup: str,
                   flavour: str = "mariadb", tables: str | None = None) -> dict[str, str]:
    """A new MariaDB database ``db`` made by ``setup`` (SQL), captured by Debezium's binlog
    connector ``flavour`` named ``prefix`` (topics ``<prefix>.<db>.<table>``), running.

    Each connector is a replica with its own server id (from ``prefix``): two with one id
    would take each other's binlog stream."""
    import zlib

    from tests.support.connect import binlog_connector

    server_id = 10_000 + zlib.crc32(prefix.encode()) % 1_000_000
    mariadb.sql(f"CREATE DATABASE {db}")
    mariadb.sql(setup, database=db)
    config = binlog_connector(flavour=flavour, port=mariadb.port, user=mariadb.user, password=mariadb.password,
                              server_id=server_id, database=db, prefix=prefix, tables=tables or f"{db}\\..*",
                              history_servers=kafka.bootstrap_servers)
    connect.create(prefix, config)
    connect.wait_running(prefix)
    return config


def change_pipeline(bootstrap: str, topic: str, path: Any, *, debezium: str, engine: str = "local") -> Any:
    """The one-table pipeline of a Debezium ``topic`` into ``path`` (key ``id``, one batch a run)."""
    from streamer.config import parse_pipelines

    text = (f"pipelines:\n  - name: orders\n"
            f"    source: {{type: kafka, bootstrap_servers: \"{bootstrap}\", topic: {topic}, debezium: {debezium}}}\n"
            f"    target: {{path: \"{path}\", record_key: [id]}}\n"
            f"    trigger: {{mode: once}}\n    engine: {engine}\n")
    (config,), problems = parse_pipelines(text)
    assert not problems, problems
    return config


def topic_events(kafka: Any, topic: str, timeout_s: float = 30.0) -> list[dict[str, Any] | None]:
    """Every value in ``topic`` (one partition), in order, decoded (a tombstone as None)."""
    import json
    import uuid

    from confluent_kafka import Consumer, TopicPartition

    ends = kafka.end_offsets(topic)
    want = sum(ends.values())
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"audit-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    out: list[tuple[int, int, dict[str, Any] | None]] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        deadline = time.monotonic() + timeout_s
        while len(out) < want and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error() is None:
                    value = msg.value()
                    out.append((msg.partition(), msg.offset(), None if value is None else json.loads(value)))
    finally:
        consumer.close()
    assert len(out) == want, f"read {len(out)} of {want} messages of {topic} in {timeout_s:.0f}s"
    return [v for _, _, v in sorted(out, key=lambda m: (m[0], m[1]))]

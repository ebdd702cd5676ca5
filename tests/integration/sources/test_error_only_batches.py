"""No record, alone or in company, stops a pipeline: batches with no good row at all.

A batch whose only record is 20 MB (over ``source.max_record_bytes``'s defaults), and one whose
records are all malformed, each commit the source position and put every record in the
error table exactly once, and ``streamer run`` exits 0: before the table exists (the
error table's commit carries the position) and after (an empty data commit does). It
used to fail ("field 'id' ... is missing from the batch", exit 1) whenever the table
existed, and to read such a batch again after every restart when it did not.

One test per source kind: files (JSON, inferred schema), Kafka JSON (inferred schema)
and Kafka Avro (schema registry). The independent answer is a model of what was sent:
each bad record's own position (``file:line``, ``topic/partition/offset``) once in the
error table, the good records in the table, and nothing read again by a later run.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from streamer.cli import main
from streamer.config import load_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table

pytestmark = [pytest.mark.integration]

#: The runaway record: over the default limits of both sources (8 MB files, 16 MB Kafka),
#: one of a kind in its batch.
HUGE_BYTES = 20 * 1024 * 1024
AVRO_SCHEMA = {
    "type": "record",
    "name": "Rec",
    "namespace": "io.morstreamer.test",
    "fields": [{"name": "id", "type": "string"}, {"name": "v", "type": "long"}, {"name": "pad", "type": "string"}],
}


@dataclass
class Feed:
    """Sends records to one source; returns each record's own position, in order."""

    source_yaml: str
    send: Callable[[list[bytes]], list[str]]
    encode: Callable[[dict], bytes]
    malformed: list[bytes]
    sent: list[str] = field(default_factory=list)


def _files_feed(tmp_path: Path) -> Feed:
    src = tmp_path / "in"
    src.mkdir()
    count = [0]

    def send(records: list[bytes]) -> list[str]:
        count[0] += 1
        path = src / f"{count[0]:03d}.json"
        path.write_bytes(b"".join(r + b"\n" for r in records))
        return [f"{path}:{i + 1}" for i in range(len(records))]

    return Feed(f'{{type: files, path: "{src}", format: json}}', send,
                lambda r: json.dumps(r).encode(), [b"{broken", b'{"id": "m2", "v": ]'])


def _kafka_send(kafka, topic: str) -> Callable[[list[bytes]], list[str]]:
    from confluent_kafka import Producer

    def send(records: list[bytes]) -> list[str]:
        # a producer that may send the 20 MB record (the topic allows it too)
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "message.max.bytes": 64 * 1024 * 1024,
                             "message.timeout.ms": 60_000, "enable.idempotence": True})
        where: list[str] = []
        failed: list[str] = []

        def done(err, msg) -> None:
            if err is not None:
                failed.append(str(err))
            else:
                where.append(f"{msg.topic()}/{msg.partition()}/{msg.offset()}")

        for r in records:
            producer.produce(topic, value=r, partition=0, on_delivery=done)
            producer.flush(60)  # one at a time: positions in sending order
        assert not failed and len(where) == len(records), failed
        return where

    return send


def _topic(kafka, prefix: str) -> str:
    return kafka.create_topic(f"{prefix}-{uuid.uuid4().hex[:8]}", partitions=1,
                              config={"max.message.bytes": str(64 * 1024 * 1024)})


def _kafka_json_feed(kafka, tmp_path: Path) -> Feed:
    topic = _topic(kafka, "alone-json")
    return Feed(f'{{type: kafka, bootstrap_servers: "{kafka.bootstrap_servers}", topic: {topic}, format: json}}',
                _kafka_send(kafka, topic), lambda r: json.dumps(r).encode(), [b"{broken", b"not json at all"])


def _kafka_avro_feed(kafka, registry, tmp_path: Path) -> Feed:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from streamer.sources.kafka.avro import confluent_frame

    topic = _topic(kafka, "alone-avro")
    client = SchemaRegistryClient({"url": registry.url, "timeout": 10})
    serialize = AvroSerializer(client, json.dumps(AVRO_SCHEMA), conf={"auto.register.schemas": True})
    ctx = SerializationContext(topic, MessageField.VALUE)
    first = serialize({"id": "warm", "v": 0, "pad": ""}, ctx)  # registers the schema: its id frames a bad body
    schema_id = int.from_bytes(first[1:5], "big")
    return Feed(
        f'{{type: kafka, bootstrap_servers: "{kafka.bootstrap_servers}", topic: {topic}, format: avro, '
        f'schema_registry: {{url: "{registry.url}"}}}}',
        _kafka_send(kafka, topic), lambda r: serialize(r, ctx),
        [b"not avro", confluent_frame(schema_id, b"\x02")],  # no magic byte; a truncated body
    )


@pytest.fixture(params=["files", "kafka-json", "kafka-avro"])
def feed(request, tmp_path) -> Feed:
    if request.param == "files":
        return _files_feed(tmp_path)
    kafka = request.getfixturevalue("kafka")
    if request.param == "kafka-json":
        return _kafka_json_feed(kafka, tmp_path)
    return _kafka_avro_feed(kafka, request.getfixturevalue("schema_registry"), tmp_path)


def test_a_batch_without_a_good_record_commits_its_position_and_its_errors(feed, spark, tmp_path):
    yaml = tmp_path / "p.yaml"
    yaml.write_text(f"""
pipelines:
  - name: alone
    source: {feed.source_yaml}
    target: {{path: "{tmp_path / 'lake' / 'alone'}", record_key: [id]}}
    policies: {{log_compaction: {{mode: "off"}}, compaction: {{mode: "off"}}, clean: {{mode: "off"}}, archive: {{mode: "off"}}}}
    trigger: {{mode: once}}
    engine: local
""")
    (config,) = load_pipelines(str(yaml))
    limit = int(config.source.max_record_bytes)
    huge = feed.encode({"id": "huge", "v": 1, "pad": "x" * HUGE_BYTES})
    assert len(huge) > limit
    bad: dict[str, str] = {}  # position -> what the reason must say
    good: dict[str, int] = {}

    def run_once() -> None:
        assert main(["run", str(yaml), "--once"]) == 0

    # 1-2: before the table exists - the error commit carries the position
    for records, says in (([huge], "exceeds source.max_record_bytes"), (feed.malformed, "")):
        for where in feed.send(records):
            bad[where] = says
        run_once()
    assert not Path(config.target.path, ".hoodie").exists()
    # 3: a good record creates the table
    feed.send([feed.encode({"id": "g1", "v": 10, "pad": ""})])
    good["g1"] = 10
    run_once()
    # 4-5: the same kinds of batches with the table there - an empty data commit each
    for records, says in (([huge], "exceeds source.max_record_bytes"), (feed.malformed, "")):
        for where in feed.send(records):
            bad[where] = says
        run_once()

    # every bad record once, under its own position; nothing left to read
    errors = Table.open(config.errors.path).read().to_pylist()
    positions = sorted(e["source_position"] for e in errors)
    assert positions == sorted(bad), (positions, sorted(bad))
    for e in errors:
        assert bad[e["source_position"]] in e["reason"], e["reason"]
    rows = Table.open(config.target.path).read().to_pylist()
    assert {r["id"]: r["v"] for r in rows} == good
    again = PipelineRunner(config, spark=spark).run_once()
    assert again.skipped or again.read == 0, again
    assert Table.open(config.errors.path).read().num_rows == len(bad)

"""Kafka Avro source against a real schema registry (Apicurio, Confluent-compatible API).

Records are produced the way real producers do it: ``confluent_kafka``'s
``AvroSerializer`` registers the schema under ``<topic>-value`` and frames every
record with the id the registry returned (magic 0 + 4-byte id + Avro body). Two
versions are mixed on one topic; v2 adds two fields with defaults.

Decided semantics (Avro schema resolution, as Confluent's deserializer with a reader
schema and Spark's ``from_avro`` with an evolved ``avroSchema`` give): the reader schema
is the subject's *latest* version, each record is decoded with the writer schema its id
names and resolved into the reader schema, so v1 records get the added fields'
*defaults* — ``"EUR"`` for ``currency`` (a default, not null) and null for ``tip``
(whose default is null). Records whose id the registry does not know, and bodies that do
not decode, become ``batch.errors`` rows with the reason; the good rows still land.
"""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import fastavro
import pytest

from streamer.config.sources import KafkaSourceConfig
from streamer.errors import StreamerError
from streamer.local.kafka import free_port
from streamer.local.registry import RegistryClient, SchemaRegistryError
from streamer.sources import build_source
from streamer.sources.kafka.avro import confluent_frame

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

V1: dict[str, Any] = {
    "type": "record",
    "name": "Trip",
    "namespace": "io.morstreamer.test",
    "fields": [
        {"name": "uuid", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "fare", "type": "double"},
    ],
}
V2: dict[str, Any] = {
    **V1,
    "fields": [
        *V1["fields"],
        {"name": "currency", "type": "string", "default": "EUR"},
        {"name": "tip", "type": ["null", "double"], "default": None},
    ],
}


def _serializers(registry_url: str, subject: str):
    """v1 and v2 serializers that auto-register under ``subject`` (BACKWARD compatibility)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer

    client = SchemaRegistryClient({"url": registry_url, "timeout": 10})
    client.set_compatibility(subject, "BACKWARD")  # v2 must be accepted as an evolution of v1
    conf = {"auto.register.schemas": True}
    return (
        client,
        AvroSerializer(client, json.dumps(V1), conf=conf),
        AvroSerializer(client, json.dumps(V2), conf=conf),
    )


def _avro_config(kafka, topic: str, registry_url: str, **extra: Any) -> KafkaSourceConfig:
    return KafkaSourceConfig(
        type="kafka",
        bootstrap_servers=kafka.bootstrap_servers,
        topic=topic,
        format="avro",
        schema_registry={"url": registry_url, "timeout": "5s"},
        **extra,
    )


def test_two_schema_versions_mixed_on_one_topic_decode_with_defaults(kafka, schema_registry, spark):
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = kafka.create_topic(f"avro-reg-{uuid.uuid4().hex[:8]}", partitions=2)
    subject = f"{topic}-value"
    client, ser_v1, ser_v2 = _serializers(schema_registry.url, subject)
    ctx = SerializationContext(topic, MessageField.VALUE)

    expected: list[dict[str, Any]] = []
    payloads: list[bytes] = []
    for i in range(12):  # v1, v1, v2, v1, v1, v2 ... interleaved across both partitions
        base = {"uuid": f"u{i:02d}", "ts": 1_700_000_000_000 + i, "fare": i * 1.25}
        if i % 3 == 2:
            rec = {**base, "currency": "USD", "tip": None if i == 5 else i / 10}
            payloads.append(ser_v2(rec, ctx))
            expected.append(rec)
        else:
            payloads.append(ser_v1(base, ctx))
            expected.append({**base, "currency": "EUR", "tip": None})

    v1_id = client.lookup_schema(subject, _schema(V1)).schema_id
    v2_id = client.get_latest_version(subject).schema_id
    assert v1_id != v2_id and client.get_versions(subject) == [1, 2]
    assert {p[1:5] for p in payloads} == {v1_id.to_bytes(4, "big"), v2_id.to_bytes(4, "big")}
    assert all(p[0] == 0 for p in payloads)  # real Confluent framing from the serializer

    unknown_id = max(v1_id, v2_id) + 1000
    bad = [
        confluent_frame(
            unknown_id, _body(V1, {"uuid": "x", "ts": 1, "fare": 1.0})
        ),  # id not registered
        confluent_frame(v2_id, b"\x06abc"),  # known id, truncated body
        b"not avro at all",  # no magic byte
    ]
    kafka.produce(topic, payloads[:6] + bad + payloads[6:], keys=[str(i) for i in range(15)])

    batch = build_source(_avro_config(kafka, topic, schema_registry.url)).read_batch(spark, None)
    try:
        assert batch.df.columns == [
            "uuid",
            "ts",
            "fare",
            "currency",
            "tip",
        ]  # the latest (v2) shape
        got = sorted((r.asDict() for r in batch.df.collect()), key=lambda r: r["uuid"])
        assert got == expected
        reasons = sorted(r.reason for r in batch.errors.collect())
        assert len(reasons) == 3, reasons
        assert any(f"schema id {unknown_id} not found" in r for r in reasons), reasons
        assert any(r.startswith("Avro decode failed") for r in reasons), reasons
        assert any("magic byte" in r for r in reasons), reasons
    finally:
        batch.release()


def test_fixed_schema_file_reads_serializer_framed_records(kafka, schema_registry, spark, tmp_path):
    """A registry-less pipeline (``avro_schema_file``) on a single-schema topic.

    The fixed schema is both writer and reader, so the schema id in the frame is
    skipped, not looked up: this is for topics whose producers all use that one schema.
    """
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = kafka.create_topic(f"avro-file-{uuid.uuid4().hex[:8]}", partitions=1)
    _client, _v1, ser_v2 = _serializers(schema_registry.url, f"{topic}-value")
    ctx = SerializationContext(topic, MessageField.VALUE)
    records = [
        {"uuid": f"f{i}", "ts": i, "fare": 2.0 * i, "currency": "CHF", "tip": 0.5} for i in range(5)
    ]
    kafka.produce(topic, [ser_v2(r, ctx) for r in records])
    avsc = tmp_path / "trip_v2.avsc"
    avsc.write_text(json.dumps(V2))

    config = KafkaSourceConfig(
        type="kafka",
        bootstrap_servers=kafka.bootstrap_servers,
        topic=topic,
        format="avro",
        avro_schema_file=str(avsc),
        include_metadata=True,
    )
    batch = build_source(config).read_batch(spark, None)
    try:
        rows = sorted((r.asDict() for r in batch.df.collect()), key=lambda r: r["ts"])
        assert [{k: r[k] for k in records[0]} for r in rows] == records
        assert [r["_kafka_offset"] for r in rows] == list(range(5))
        assert batch.errors.count() == 0
    finally:
        batch.release()


@pytest.mark.timeout(60)
def test_registry_down_is_a_clear_error_in_bounded_time():
    """Nothing listens on the port: the liveness check names the URL and gives up quickly."""
    url = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"
    with pytest.raises(SchemaRegistryError, match=url):
        RegistryClient(url, timeout_s=2).ping()


@pytest.mark.timeout(120)
def test_source_with_registry_down_fails_clearly_in_bounded_time(kafka, spark):
    topic = kafka.create_topic(f"avro-down-{uuid.uuid4().hex[:8]}", partitions=1)
    kafka.produce(topic, [confluent_frame(1, _body(V1, {"uuid": "a", "ts": 1, "fare": 1.0}))])
    url = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"
    config = _avro_config(kafka, topic, url)
    with pytest.raises(StreamerError, match="127.0.0.1"):
        build_source(config).read_batch(spark, None)


def _schema(schema: dict[str, Any]):
    from confluent_kafka.schema_registry import Schema

    return Schema(json.dumps(schema), "AVRO")


def _body(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return buf.getvalue()


def test_registry_that_cannot_start_fails_with_its_log_tail(tmp_path):
    """A broken install exits at once: the error names the URL and quotes the log."""
    from streamer.local.registry import LocalSchemaRegistry

    home = tmp_path / "apicurio"
    home.mkdir()
    (home / "apicurio-registry-app-0.0.0-runner.jar").write_bytes(b"not a jar")
    registry = LocalSchemaRegistry(home=home)
    with pytest.raises(
        SchemaRegistryError, match=r"exited during start-up .*log tail:\n.*jar"
    ) as info:
        registry.start(timeout_s=30)
    assert "http://127.0.0.1:" in str(info.value)
    assert not registry.running

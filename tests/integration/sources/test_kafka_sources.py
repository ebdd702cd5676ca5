"""Kafka JSON and Avro sources against a real broker: good rows, bad rows, exact positions."""

from __future__ import annotations

import io
import json
import time
import uuid

import fastavro
import pytest

from streamer.config.sources import KafkaSourceConfig
from streamer.errors import SourceError
from streamer.sources.kafka import KafkaSource
from streamer.sources.kafka.avro import confluent_frame
from streamer.sources.position import KafkaOffsets, position_from_json, position_to_json

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def _topic(kafka, partitions: int = 2) -> str:
    return kafka.create_topic(f"src-{uuid.uuid4().hex[:8]}", partitions=partitions)


def _json_config(kafka, topic: str, **extra) -> KafkaSourceConfig:
    return KafkaSourceConfig(type="kafka", bootstrap_servers=kafka.bootstrap_servers, topic=topic, **extra)


def test_json_batches_split_good_and_bad_records_and_resume_exactly(kafka, spark):
    topic = _topic(kafka, partitions=2)
    good = [json.dumps({"id": i, "city": "sf" if i % 2 else "ams", "fare": i * 1.5}) for i in range(20)]
    bad = ["{not json", "", '{"id": 5,']
    kafka.produce(topic, good[:10] + bad + good[10:], keys=[str(i) for i in range(23)])

    source = KafkaSource(_json_config(kafka, topic, schema="id BIGINT, city STRING, fare DOUBLE", max_records_per_batch=15))
    first = source.read_batch(spark, None)
    second = source.read_batch(spark, first.end)
    third = source.read_batch(spark, second.end)
    try:
        assert first.start == KafkaOffsets(topic=topic, partitions={0: 0, 1: 0})
        assert first.start.records_until(first.end) == 15
        assert not third.has_new_data
        ids = sorted(r.id for b in (first, second) for r in b.df.collect())
        assert ids == list(range(20))  # every good record exactly once across batches
        errors = [r for b in (first, second) for r in b.errors.collect()]
        assert sorted(r.raw_payload for r in errors) == sorted(bad)
        for r in errors:
            assert r.reason.startswith("malformed JSON")
            assert r.topic == topic and r.partition in (0, 1) and r.offset >= 0
            assert r.source_position == f"{topic}/{r.partition}/{r.offset}"
        # The position survives the commit metadata round trip and resumes identically.
        restored = position_from_json(position_to_json(first.end))
        again = source.read_batch(spark, restored)
        assert sorted(r.id for r in again.df.collect()) == sorted(r.id for r in second.df.collect())
    finally:
        for b in (first, second, third):
            b.release()


def test_json_schema_is_inferred_and_metadata_columns_added(kafka, spark):
    topic = _topic(kafka, partitions=1)
    kafka.produce(topic, [json.dumps({"uuid": f"u{i}", "ts": 1000 + i, "nested": {"a": i}}) for i in range(5)])
    batch = KafkaSource(_json_config(kafka, topic, include_metadata=True)).read_batch(spark, None)
    rows = sorted(batch.df.collect(), key=lambda r: r.ts)
    assert [r.uuid for r in rows] == [f"u{i}" for i in range(5)]
    assert rows[2].nested.a == 2
    assert [r._kafka_offset for r in rows] == list(range(5))
    assert {r._kafka_topic for r in rows} == {topic}
    assert batch.errors.count() == 0
    assert batch.end == KafkaOffsets(topic=topic, partitions={0: 5})


def test_latest_starting_offsets_and_data_loss_check(kafka, spark):
    topic = _topic(kafka, partitions=1)
    kafka.produce(topic, ['{"a": 1}'] * 3)
    source = KafkaSource(_json_config(kafka, topic, starting_offsets="latest"))
    batch = source.read_batch(spark, None)
    assert batch.end == KafkaOffsets(topic=topic, partitions={0: 3}) and not batch.has_new_data
    beyond = KafkaOffsets(topic=topic, partitions={0: 99})
    with pytest.raises(SourceError, match="outside the available range"):
        source.read_batch(spark, beyond)
    lenient = KafkaSource(_json_config(kafka, topic, fail_on_data_loss=False))
    assert lenient.read_batch(spark, beyond).end == KafkaOffsets(topic=topic, partitions={0: 3})


def test_missing_topic_is_a_source_error_naming_it(kafka, spark):
    source = KafkaSource(_json_config(kafka, "no-such-topic-" + uuid.uuid4().hex[:6], metadata_timeout="5s"))
    with pytest.raises(SourceError, match="no-such-topic"):
        source.read_batch(spark, None)


def test_stream_micro_batches_decode_and_report_positions(kafka, spark, tmp_path):
    topic = _topic(kafka, partitions=2)
    kafka.produce(topic, [json.dumps({"id": i}) for i in range(30)] + ["oops"])
    source = KafkaSource(_json_config(kafka, topic, schema="id INT", max_records_per_batch=10))
    seen: list[int] = []
    errors: list[str] = []
    ends: list[KafkaOffsets] = []
    state: dict[str, KafkaOffsets | None] = {"pos": None}

    def on_batch(raw, batch_id):
        batch = source.batch_from_raw(raw, state["pos"])
        seen.extend(r.id for r in batch.df.collect())
        errors.extend(r.raw_payload for r in batch.errors.collect())
        ends.append(batch.end)
        state["pos"] = batch.end
        batch.release()

    query = (
        source.stream(spark).writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(seen) + len(errors) < 31 and query.exception() is None:
            time.sleep(0.2)
    finally:
        query.stop()
    assert query.exception() is None
    assert sorted(seen) == list(range(30)) and errors == ["oops"]
    assert len(ends) >= 3  # maxOffsetsPerTrigger split the backlog
    assert sum(ends[-1].partitions.values()) == 31


AVRO_SCHEMA = {
    "type": "record",
    "name": "Trip",
    "fields": [
        {"name": "uuid", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "fare", "type": ["null", "double"], "default": None},
    ],
}


def _avro_body(record: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(AVRO_SCHEMA), record)
    return buf.getvalue()


def test_confluent_avro_with_fixed_schema_file(kafka, spark, tmp_path):
    avsc = tmp_path / "trip.avsc"
    avsc.write_text(json.dumps(AVRO_SCHEMA))
    topic = _topic(kafka, partitions=1)
    records = [{"uuid": f"u{i}", "ts": i, "fare": None if i == 3 else i * 2.0} for i in range(6)]
    payloads = [confluent_frame(7, _avro_body(r)) for r in records]
    payloads += [b"\x01garbage", confluent_frame(7, _avro_body(records[0])[:2])]
    kafka.produce(topic, payloads)
    config = KafkaSourceConfig(
        type="kafka", bootstrap_servers=kafka.bootstrap_servers, topic=topic, format="avro", avro_schema_file=str(avsc)
    )
    batch = KafkaSource(config).read_batch(spark, None)
    try:
        got = sorted((r.asDict() for r in batch.df.collect()), key=lambda r: r["ts"])
        assert got == records
        errors = sorted(batch.errors.collect(), key=lambda r: r.offset)
        assert [r.offset for r in errors] == [6, 7]
        assert "magic byte" in errors[0].reason
        assert errors[1].reason.startswith("Avro decode failed")
        assert errors[0].payload_encoding == "base64"
    finally:
        batch.release()

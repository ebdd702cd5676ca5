"""Issue 12, cases 5 and 6 on Kafka: an inferred schema takes the table's types, and a
record found bad after decoding keeps its own offset and its original bytes."""

from __future__ import annotations

import uuid

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

YAML = """
pipelines:
  - name: inferred
    source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic: {topic}, format: json}}
    target: {{path: "{t}", record_key: [id], ordering_field: ts}}
    trigger: {{mode: once}}
    engine: local
"""


def test_one_wrong_typed_kafka_value_errors_only_its_record(kafka, spark, tmp_path):
    topic = kafka.create_topic(f"poison-{uuid.uuid4().hex[:8]}", partitions=1)
    (config,), problems = parse_pipelines(YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic,
                                                      t=tmp_path / "t"))
    assert not problems
    kafka.produce(topic, ['{"id": "a", "ts": 1}', '{"id": "b", "ts": 2}'])
    assert PipelineRunner(config, spark=spark).run_once().written == 2

    wrong, unkeyed = '{"id": "x", "ts": "not-a-number"}', '{"id":  null, "ts": 9}'
    kafka.produce(topic, ['{"id": "c", "ts": 3}', wrong, unkeyed, b'{"id": "\xff", "ts": 4}'])
    report = PipelineRunner(config, spark=spark).run_once()
    assert (report.read, report.written, report.errored) == (4, 1, 3)
    errors = sorted(Table.open(config.errors.path).read().to_pylist(), key=lambda e: e["offset"])
    assert len(errors) == report.errored
    assert [e["offset"] for e in errors] == [3, 4, 5]
    assert errors[0]["raw_payload"] == wrong and errors[0]["reason"].startswith("field 'ts'")
    assert errors[1]["raw_payload"] == unkeyed and errors[1]["source_position"] == f"{topic}/0/4"
    assert errors[2]["payload_encoding"] == "base64" and "UTF-8" in errors[2]["reason"]
    assert sorted(Table.open(config.target.path).read().column("id").to_pylist()) == ["a", "b", "c"]

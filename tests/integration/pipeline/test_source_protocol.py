"""What the pipeline asks a streaming source since it names none (issue 14): warm-up,
the stream's start, and dropping rows a replayed micro-batch already committed."""

from __future__ import annotations

import logging
import uuid

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.sources.base import StreamingSource, WarmsUp
from tests.support.trip_model import TripModel, kafka_pipeline_yaml, produce_records

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def test_kafka_warm_up_start_and_committed_filter(kafka, spark, tmp_path, caplog):
    topic = kafka.create_topic(f"proto-{uuid.uuid4().hex[:8]}", partitions=2)
    (config,), problems = parse_pipelines("pipelines:\n" + kafka_pipeline_yaml(
        "proto", kafka.bootstrap_servers, topic, str(tmp_path / "lake")))
    assert not problems
    produce_records(kafka, topic, TripModel(seed=1, key_space=100).records(50))
    runner = PipelineRunner(config, spark=spark)
    source = runner.source
    assert isinstance(source, StreamingSource) and isinstance(source, WarmsUp)
    assert runner.identity.hidden  # topic/partition/offset read for error ids, not written

    with caplog.at_level(logging.INFO, logger="streamer.pipeline.runner"):
        runner.warm_up()
    assert "warm-up skipped" not in caplog.text
    assert not (tmp_path / "lake" / "proto").exists()

    start = source.resolve_stream_start(None)  # starting_offsets: earliest
    assert set(start.partitions) == {0, 1} and set(start.partitions.values()) == {0}
    ends = kafka.end_offsets(topic)
    raw = source.read_raw(spark, start, type(start)(topic=topic, partitions=ends))
    assert raw.count() == 50
    half = type(start)(topic=topic, partitions={p: o // 2 for p, o in ends.items()})
    assert source.filter_committed(raw, half).count() == sum(o - o // 2 for o in ends.values())
    assert source.filter_committed(raw, None).count() == 50

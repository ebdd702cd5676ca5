"""``trigger.read: poll`` (issue 14): a continuous Kafka pipeline whose micro-batches the
driver plans (end offsets from the broker, capped) and reads with a batch read, instead
of a Structured Streaming query - the same exactly-once rule, no end-offsets job."""

from __future__ import annotations

import threading
import uuid

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from tests.support.trip_model import (
    TripModel,
    assert_each_record_committed_once,
    assert_matches_model,
    kafka_pipeline_yaml,
    produce_records,
    run_until_caught_up,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def test_polled_continuous_kafka_commits_each_record_once(kafka, spark, tmp_path):
    topic = kafka.create_topic(f"poll-{uuid.uuid4().hex[:8]}", partitions=3)
    (config,), problems = parse_pipelines("pipelines:\n" + kafka_pipeline_yaml(
        "poll", kafka.bootstrap_servers, topic, str(tmp_path / "lake"),
        trigger="{mode: continuous, interval: 300ms, read: poll}", source_extra=", max_records_per_batch: 700"))
    assert not problems
    model = TripModel(seed=21, key_space=1_500)
    produce_records(kafka, topic, model.records(2_000))
    done = threading.Event()

    def produce() -> None:
        try:
            for _ in range(3):
                produce_records(kafka, topic, model.records(500))
        finally:
            done.set()

    runner = PipelineRunner(config, spark=spark)
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    run_until_caught_up(runner, kafka, topic, done.is_set, timeout_s=300)
    producer.join(timeout=60)
    committed = [r for r in runner.reports if r.instant]
    assert sum(r.read for r in committed) == 3_500
    assert max(r.read for r in committed) <= 700  # capped per batch
    assert_matches_model(config.target.path, model.expected())
    assert assert_each_record_committed_once(config.target.path, kafka, topic) == len(committed)
    assert not (tmp_path / "lake" / "_checkpoints" / "poll").exists()  # no Spark streaming checkpoint

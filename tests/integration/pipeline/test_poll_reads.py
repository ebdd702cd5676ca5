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


def _polled(kafka, tmp_path, name: str, partitions: int, interval: str, cap: int):
    """A fresh topic and a continuous JSON-trips pipeline polling it, ``cap`` records a batch."""
    topic = kafka.create_topic(f"{name}-{uuid.uuid4().hex[:8]}", partitions=partitions)
    (config,), problems = parse_pipelines("pipelines:\n" + kafka_pipeline_yaml(
        name, kafka.bootstrap_servers, topic, str(tmp_path / "lake"),
        trigger=f"{{mode: continuous, interval: {interval}, read: poll}}",
        source_extra=f", max_records_per_batch: {cap}"))
    assert not problems
    return topic, config


def test_polled_continuous_kafka_commits_each_record_once(kafka, spark, tmp_path):
    topic, config = _polled(kafka, tmp_path, "poll", partitions=3, interval="300ms", cap=700)
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
    # with a backlog the next batch was read while one committed (ahead.py), used only
    # where it started at the committed position: the checks below hold all the same
    assert any(r.read_ahead for r in committed)
    assert_matches_model(config.target.path, model.expected())
    assert assert_each_record_committed_once(config.target.path, kafka, topic) == len(committed)
    assert not (tmp_path / "lake" / "_checkpoints" / "poll").exists()  # no Spark streaming checkpoint


def test_a_batch_read_ahead_of_a_failed_commit_is_never_written(kafka, spark, tmp_path, monkeypatch):
    """The commit of a batch fails while the next one is read ahead: the loop stops with
    the failure, the batch read ahead is released unwritten, and a new run reads from
    the committed position - every record once, the table equal to the model."""
    topic, config = _polled(kafka, tmp_path, "ahead", partitions=2, interval="100ms", cap=300)
    model = TripModel(seed=5, key_space=800)
    produce_records(kafka, topic, model.records(1_500))

    runner = PipelineRunner(config, spark=spark)
    commit, calls = runner._commit, []

    def failing_second_commit(prepared, end, batch_id):
        calls.append(batch_id)
        if len(calls) == 2:
            assert runner._ahead.pending  # the third batch is being read meanwhile
            raise OSError("disk full (injected)")
        return commit(prepared, end, batch_id)

    monkeypatch.setattr(runner, "_commit", failing_second_commit)
    with pytest.raises(OSError, match="injected"):
        runner.run_continuous(threading.Event(), timeout_s=120)
    assert not runner._ahead.pending
    assert [r.read_ahead for r in runner.reports] == [False]  # one batch committed, read normally

    again = PipelineRunner(config, spark=spark)
    run_until_caught_up(again, kafka, topic, lambda: True, timeout_s=300)
    committed = [r for r in runner.reports + again.reports if r.instant]
    assert sum(r.read for r in committed) == 1_500
    assert any(r.read_ahead for r in again.reports)
    assert_matches_model(config.target.path, model.expected())
    assert assert_each_record_committed_once(config.target.path, kafka, topic) == len(committed)

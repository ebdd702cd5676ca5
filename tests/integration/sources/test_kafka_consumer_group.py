"""The consumer group mirrors the table: after each commit its offsets equal the
position stored in the Hudi commit (read back with AdminClient, as a dashboard would),
and ``lag`` counts the records after a position from the broker's watermarks."""

from __future__ import annotations

import uuid

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.checkpoint import checkpoint_history
from streamer.pipeline.runner import PipelineRunner
from streamer.sources.base import PartitionLag
from streamer.sources.position import KafkaOffsets
from tests.support.trip_model import (
    TripModel,
    kafka_pipeline_yaml,
    produce_records,
    run_until_caught_up,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def _group_offsets(kafka, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=15)
    found = futures[group].result(timeout=20)
    return {tp.partition: tp.offset for tp in found.topic_partitions if tp.topic == topic and tp.offset >= 0}


def _config(kafka, topic: str, lake: str, source_extra: str = ""):
    (config,), problems = parse_pipelines(
        "pipelines:\n" + kafka_pipeline_yaml("groups", kafka.bootstrap_servers, topic, lake,
                                             trigger="{mode: once}", source_extra=source_extra)
    )
    assert not problems
    return config


def test_group_offsets_equal_the_tables_position_after_each_commit(kafka, spark, tmp_path):
    topic = kafka.create_topic(f"group-{uuid.uuid4().hex[:8]}", partitions=3)
    group = f"etl-{uuid.uuid4().hex[:6]}"
    config = _config(kafka, topic, str(tmp_path / "lake"), source_extra=f", group_id: {group}")
    model = TripModel(seed=11, key_space=2_000)
    produce_records(kafka, topic, model.records(900))

    runner = PipelineRunner(config, spark=spark)
    assert runner.run_once().written == 900
    stored = checkpoint_history(runner.sink.fs, runner.sink.path)[-1].position
    assert stored.partitions == kafka.end_offsets(topic)
    assert _group_offsets(kafka, group, topic) == stored.partitions

    produce_records(kafka, topic, model.records(250))
    assert runner.source.lag(stored) == [
        PartitionLag(f"{topic}-{p}", kafka.end_offsets(topic)[p] - stored.partitions[p]) for p in range(3)
    ]
    assert runner.run_once().written == 250
    stored = checkpoint_history(runner.sink.fs, runner.sink.path)[-1].position
    assert _group_offsets(kafka, group, topic) == stored.partitions == kafka.end_offsets(topic)
    assert [lag.records for lag in runner.source.lag(stored)] == [0, 0, 0]
    runner.source.close()


def test_lag_without_a_position_and_the_default_group(kafka, spark, tmp_path):
    topic = kafka.create_topic(f"lag-{uuid.uuid4().hex[:8]}", partitions=2)
    produce_records(kafka, topic, TripModel(seed=12, key_space=100).records(40))
    config = _config(kafka, topic, str(tmp_path / "lake"))
    runner = PipelineRunner(config, spark=spark)
    ends = kafka.end_offsets(topic)
    assert runner.source.lag(None) == [PartitionLag(f"{topic}-{p}", ends[p]) for p in range(2)]

    runner.run_once()
    assert _group_offsets(kafka, f"mor-streamer-{config.name}", topic) == ends
    runner.source.on_table_commit(KafkaOffsets(topic=topic, partitions={0: 1, 1: 1}), "20260101000000000")
    assert _group_offsets(kafka, f"mor-streamer-{config.name}", topic) == {0: 1, 1: 1}  # mirrors, never decides
    runner.source.close()


def test_continuous_run_commits_the_group_from_spark_micro_batches(kafka, spark, tmp_path):
    """foreachBatch calls the hook from Spark's callback thread; the group still follows."""
    topic = kafka.create_topic(f"group-stream-{uuid.uuid4().hex[:8]}", partitions=2)
    group = f"etl-{uuid.uuid4().hex[:6]}"
    (config,), problems = parse_pipelines(
        "pipelines:\n" + kafka_pipeline_yaml("groups_stream", kafka.bootstrap_servers, topic, str(tmp_path / "lake"),
                                             source_extra=f", group_id: {group}",
                                             trigger="{mode: continuous, interval: 500ms, read: stream}")
    )
    assert not problems
    produce_records(kafka, topic, TripModel(seed=13, key_space=500).records(300))
    runner = PipelineRunner(config, spark=spark)
    run_until_caught_up(runner, kafka, topic, lambda: True, timeout_s=180)
    stored = checkpoint_history(runner.sink.fs, runner.sink.path)[-1].position
    assert _group_offsets(kafka, group, topic) == stored.partitions == kafka.end_offsets(topic)
    runner.source.close()


def test_a_group_left_behind_is_caught_up_by_the_next_run_even_without_new_records(kafka, spark, tmp_path):
    """A group commit that failed after the table's commit (a broker restarting) left the
    group behind; the next run, with nothing new to read, still brings it to the table's
    position - else lag monitors page for records long since written."""
    from confluent_kafka import Consumer, TopicPartition

    topic = kafka.create_topic(f"group-behind-{uuid.uuid4().hex[:8]}", partitions=2)
    group = f"etl-{uuid.uuid4().hex[:6]}"
    config = _config(kafka, topic, str(tmp_path / "lake"), source_extra=f", group_id: {group}")
    produce_records(kafka, topic, TripModel(seed=12, key_space=500).records(300))
    first = PipelineRunner(config, spark=spark)
    assert first.run_once().instant
    table = first.position.partitions
    assert _group_offsets(kafka, group, topic) == table
    behind = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    try:  # what a lost group commit leaves: the group at an older position
        behind.commit(offsets=[TopicPartition(topic, p, 0) for p in table], asynchronous=False)
    finally:
        behind.close()
    assert _group_offsets(kafka, group, topic) == dict.fromkeys(table, 0)
    report = PipelineRunner(config, spark=spark).run_once()
    assert report.instant is None  # nothing new: no commit
    assert _group_offsets(kafka, group, topic) == table

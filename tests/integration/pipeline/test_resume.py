"""Resuming from the position stored in the table: new records only, loud on data loss,
and a micro-batch handed over twice (or replayed by Spark) is written once."""

from __future__ import annotations

import contextlib
import os
import uuid

import pytest

from streamer.config import parse_pipelines
from streamer.errors import SourceError
from streamer.pipeline.checkpoint import checkpoint_history
from streamer.pipeline.runner import PipelineRunner
from tests.support.trip_model import (
    TripModel,
    assert_matches_model,
    committed_offsets,
    kafka_pipeline_yaml,
    produce_records,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


def _config(kafka, topic: str, lake: str, trigger: str = "{mode: once}", source_extra: str = ""):
    (config,), problems = parse_pipelines(
        "pipelines:\n" + kafka_pipeline_yaml("resume", kafka.bootstrap_servers, topic, lake,
                                             trigger=trigger, source_extra=source_extra)
    )
    assert not problems
    return config


def _deltacommits(path: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(path, ".hoodie")) if n.endswith(".deltacommit"))


def test_second_once_run_commits_only_new_records(kafka, spark, tmp_path):
    topic = kafka.create_topic(f"resume-{uuid.uuid4().hex[:8]}", partitions=3)
    config = _config(kafka, topic, str(tmp_path / "lake"))
    model = TripModel(seed=3, key_space=5_000)
    produce_records(kafka, topic, model.records(3_000))

    first = PipelineRunner(config, spark=spark).run_once()
    assert (first.read, first.written) == (3_000, 3_000)
    assert_matches_model(config.target.path, model.expected())

    produce_records(kafka, topic, model.records(1_234))
    runner = PipelineRunner(config, spark=spark)  # a new process would start like this
    second = runner.run_once()
    assert (second.read, second.written) == (1_234, 1_234)
    assert second.batch_id == first.batch_id + 1
    assert_matches_model(config.target.path, model.expected())

    third = runner.run_once()  # nothing new: no commit
    assert third.skipped and third.instant is None
    assert len(_deltacommits(config.target.path)) == 2
    history = checkpoint_history(runner.sink.fs, runner.sink.path)
    assert [h.position.partitions for h in history][-1] == kafka.end_offsets(topic)


def test_position_lost_to_retention_fails_loudly_or_skips_ahead(kafka, spark, tmp_path):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    topic = kafka.create_topic(f"lost-{uuid.uuid4().hex[:8]}", partitions=2)
    lake = str(tmp_path / "lake")
    model = TripModel(seed=5, key_space=1_000)
    early = model.records(500)
    produce_records(kafka, topic, early)
    PipelineRunner(_config(kafka, topic, lake), spark=spark).run_once()
    stored = dict(kafka.end_offsets(topic))

    # More records arrive, then retention deletes past the stored position of partition 0/1.
    later = model.records(600)
    produce_records(kafka, topic, later)
    ends = kafka.end_offsets(topic)
    cut = {p: stored[p] + (ends[p] - stored[p]) // 2 for p in ends}
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    futures = admin.delete_records([TopicPartition(topic, p, o) for p, o in cut.items()], request_timeout=15)
    for f in futures.values():
        f.result(timeout=20)

    with pytest.raises(SourceError) as lost:
        PipelineRunner(_config(kafka, topic, lake), spark=spark).run_once()
    message = str(lost.value)
    assert f"{topic}/" in message and "fail_on_data_loss: false" in message
    assert any(f"offset {stored[p]} of {topic}/{p}" in message for p in stored)
    # Continuous mode refuses the same way, before starting a query.
    with pytest.raises(SourceError, match="outside the available range"):
        PipelineRunner(_config(kafka, topic, lake, "{mode: continuous, interval: 1s, read: stream}"), spark=spark).run_continuous(
            max_batches=1, timeout_s=60
        )

    skipping = PipelineRunner(_config(kafka, topic, lake, source_extra=", fail_on_data_loss: false"), spark=spark)
    report = skipping.run_once()
    assert report.read == sum(ends[p] - cut[p] for p in ends)
    assert skipping.position.partitions == ends
    # Expected: the first 500, then only the records of the later 600 that retention kept.
    survivors = _retained(kafka, topic, cut)
    kept = TripModel(seed=0)
    for rec in early + [r for r in later if (r["uuid"], r["ts"]) in survivors]:
        kept.apply(rec)
    assert_matches_model(lake + "/resume", kept.expected())


def _retained(kafka, topic: str, cut: dict[int, int]) -> set[tuple[str, int]]:
    """(uuid, ts) of the records still in the topic at or after ``cut``."""
    import json

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"probe-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    ends = kafka.end_offsets(topic)
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in cut.items()])
        out: set[tuple[str, int]] = set()
        want = sum(ends[p] - cut[p] for p in ends)
        for _ in range(200):
            if len(out) >= want:
                break
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                if msg.error() is None:
                    rec = json.loads(msg.value())
                    out.add((rec["uuid"], rec["ts"]))
        assert len(out) == want
        return out
    finally:
        consumer.close()


def test_replayed_micro_batch_writes_nothing_twice(kafka, spark, tmp_path):
    """The foreachBatch handler gets the same raw micro-batch twice, then one overlapping a
    committed one: only rows after the committed offsets are written."""
    topic = kafka.create_topic(f"replay-{uuid.uuid4().hex[:8]}", partitions=3)
    config = _config(kafka, topic, str(tmp_path / "lake"), "{mode: continuous, interval: 1s, read: stream}")
    model = TripModel(seed=9, key_space=2_000)
    produce_records(kafka, topic, model.records(2_000))
    first_end = kafka.end_offsets(topic)

    def raw_upto(ends: dict[int, int]):
        from streamer.sources.kafka import KafkaSource
        from streamer.sources.position import KafkaOffsets

        src = KafkaSource(config.source)
        begin = KafkaOffsets(topic=topic, partitions={p: 0 for p in ends})
        return src.read_raw(spark, begin, KafkaOffsets(topic=topic, partitions=ends))

    runner = PipelineRunner(config, spark=spark)
    raw = raw_upto(first_end)
    one = runner.foreach_batch(raw, 0)
    assert one.written == 2_000 and one.instant
    again = runner.foreach_batch(raw, 0)
    assert again.skipped and again.instant is None
    assert len(_deltacommits(config.target.path)) == 1

    produce_records(kafka, topic, model.records(700))
    overlapping = raw_upto(kafka.end_offsets(topic))  # 2,700 rows, 2,000 already committed
    fresh = PipelineRunner(config, spark=spark)  # a restarted process, position from the table
    two = fresh.foreach_batch(overlapping, 1)
    assert (two.read, two.written) == (700, 700)
    assert len(_deltacommits(config.target.path)) == 2
    assert_matches_model(config.target.path, model.expected())


def test_query_restarted_on_an_old_spark_checkpoint_writes_nothing_twice(kafka, spark, tmp_path):
    """Spark itself replays: the last micro-batch's commit is removed from a Spark checkpoint
    and the query restarted on it, so Spark hands the same offsets over again."""
    topic = kafka.create_topic(f"sparkreplay-{uuid.uuid4().hex[:8]}", partitions=2)
    config = _config(kafka, topic, str(tmp_path / "lake"), "{mode: continuous, interval: 500ms, read: stream}")
    model = TripModel(seed=13, key_space=1_000)
    produce_records(kafka, topic, model.records(1_500))
    checkpoint = str(tmp_path / "spark-checkpoint")

    def run_query(runner: PipelineRunner, until) -> None:
        stream = runner.source.stream(spark, None)
        query = (
            stream.writeStream.foreachBatch(runner.foreach_batch)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        try:
            wait_until(lambda: until() or not query.isActive, 120, "the query to process the topic")
        finally:
            query.stop()
        assert query.exception() is None

    def spark_caught_up() -> bool:
        """Spark wrote the commit of its newest planned batch: stopping now interrupts no
        micro-batch (the table may commit a batch a moment before Spark's own log does)."""
        def ids(kind: str) -> set[int]:
            folder = os.path.join(checkpoint, kind)
            return {int(n) for n in os.listdir(folder) if n.isdigit()} if os.path.isdir(folder) else set()

        planned = ids("offsets")
        return bool(planned) and max(planned) in ids("commits")

    first = PipelineRunner(config, spark=spark)
    run_query(first, lambda: committed_offsets(first) >= 1_500 and spark_caught_up())
    commits = sorted(os.listdir(os.path.join(checkpoint, "commits")), key=lambda n: int(n) if n.isdigit() else -1)
    last = commits[-1]
    os.remove(os.path.join(checkpoint, "commits", last))  # Spark will run batch <last> again
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(checkpoint, "commits", f".{last}.crc"))
    before = _deltacommits(config.target.path)

    second = PipelineRunner(config, spark=spark)
    run_query(second, lambda: bool(second.reports))
    assert second.reports[0].skipped, second.reports[0]
    assert _deltacommits(config.target.path) == before
    assert_matches_model(config.target.path, model.expected())

"""Kafka → continuous pipeline (Structured Streaming + foreachBatch) → MOR table, at volume."""

from __future__ import annotations

import threading
import uuid

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.checkpoint import checkpoint_history
from streamer.pipeline.runner import PipelineRunner
from tests.support.trip_model import (
    TripModel,
    assert_matches_model,
    kafka_pipeline_yaml,
    produce_records,
    run_until_caught_up,
)

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.slow]

N_RECORDS = 100_000
CHUNK = 10_000


def test_100k_upserts_and_deletes_land_exactly_as_the_model(kafka, spark, tmp_path):
    """100k JSON records (inserts, updates, deletes) produced while a continuous pipeline
    runs; the snapshot (ours and hudi-rs) equals the model, every offset is counted once."""
    topic = kafka.create_topic(f"e2e-{uuid.uuid4().hex[:8]}", partitions=3)
    model = TripModel(seed=7, key_space=30_000)
    yaml = "pipelines:\n" + kafka_pipeline_yaml(
        "trips", kafka.bootstrap_servers, topic, str(tmp_path / "lake"),
        source_extra=", max_records_per_batch: 25000",
        trigger="{mode: continuous, interval: 500ms, read: stream}",  # the Structured Streaming path, at volume
        policies="{log_compaction: {mode: inline, min_blocks: 3}, compaction: {mode: inline, trigger: {delta_commits: 3}}, "
        "clean: {mode: off}, archive: {mode: off}}",
        engine="auto",
    )
    (config,), problems = parse_pipelines(yaml)
    assert not problems
    runner = PipelineRunner(config, spark=spark)
    from streamer.pipeline.multi import _services_for

    services = _services_for(runner)

    done = threading.Event()
    produce_failure: list[BaseException] = []

    def produce() -> None:
        try:
            for _ in range(N_RECORDS // CHUNK):
                produce_records(kafka, topic, model.records(CHUNK))
        except BaseException as e:
            produce_failure.append(e)
        finally:
            done.set()

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        run_until_caught_up(runner, kafka, topic, done.is_set, timeout_s=240)
    finally:
        producer.join(timeout=60)
        if services is not None:
            services.close()
    assert not produce_failure, produce_failure
    assert model.produced == N_RECORDS

    committed = [r for r in runner.reports if not r.skipped]
    assert sum(r.read for r in committed) == N_RECORDS
    assert sum(r.written for r in committed) == N_RECORDS
    assert all(r.errored == 0 and r.filtered == 0 for r in committed)
    assert len(committed) >= 4, "expected several micro-batches"
    history = checkpoint_history(runner.sink.fs, runner.sink.path)
    assert [h.instant for h in history] == [r.instant for r in committed]
    assert_matches_model(runner.sink.path, model.expected())

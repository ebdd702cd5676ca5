"""Real broker → Spark Structured Streaming → foreachBatch: every record, exactly once."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

N_RECORDS = 10_000


def test_foreach_batch_receives_exactly_the_produced_records(kafka, spark, tmp_path):
    topic = kafka.create_topic(f"it-{uuid.uuid4().hex[:8]}", partitions=3)
    produced = [
        {"id": i, "name": f"rider-{i % 97}", "fare": round(i * 1.25, 2), "city": ["sf", "nyc", "ams"][i % 3]}
        for i in range(N_RECORDS)
    ]
    assert kafka.produce(topic, [json.dumps(r) for r in produced], keys=[str(r["id"]) for r in produced]) == N_RECORDS

    received: list[tuple[str, str]] = []
    batches: list[int] = []
    lock = threading.Lock()

    def on_batch(df, batch_id: int) -> None:
        rows = df.selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v").collect()
        with lock:
            batches.append(batch_id)
            received.extend((r.k, r.v) for r in rows)

    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", 4000)
        .load()
    )
    query = (
        stream.writeStream.foreachBatch(on_batch)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and query.isActive:
            with lock:
                if len(received) >= N_RECORDS:
                    break
            time.sleep(0.2)
    finally:
        query.stop()
    query.awaitTermination(60)

    assert not query.isActive
    assert query.exception() is None
    assert len(received) == N_RECORDS, f"received {len(received)} of {N_RECORDS}"
    # Content: every produced record, once, with its key.
    got = sorted((int(k), json.loads(v)) for k, v in received)
    assert [k for k, _ in got] == list(range(N_RECORDS))
    assert [v for _, v in got] == produced
    assert len(batches) >= 3  # maxOffsetsPerTrigger really split it into micro-batches
    assert batches == sorted(batches)

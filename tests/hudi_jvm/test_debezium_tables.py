"""A table written from a Debezium change stream reads alike in Apache Hudi 0.15, 1.0 and
1.2, hudi-rs and ours: deletes from ``before``, log-position ordering, and unchanged
TOASTed values completed at write time (so no reader needs Hudi's Debezium payload).

The stream is the exact JSON Debezium's Postgres connector publishes, produced to the real
broker; the expected rows come from a model that applies the events in log order
(:class:`tests.support.cdc.RowModel`), not from any reader.
"""

from __future__ import annotations

import json
import uuid

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from tests.hudi_jvm.compare import Expected, Query, assert_readers_match
from tests.support.cdc import PLACEHOLDER, RowModel, pg_event

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance, pytest.mark.kafka]

YAML = """
pipelines:
  - name: orders
    source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic: {topic}, debezium: postgres}}
    target: {{path: "{t}", record_key: [id]}}
    trigger: {{mode: once}}
    engine: local
"""
COLUMNS = ["id", "name", "qty", "note", "_event_lsn", "_change_operation_type"]


def _row(i: int, name: str, qty: int, note: str | None = None) -> dict:
    return {"id": i, "name": name, "qty": qty, "note": note}


def _batches() -> list[list[dict | None]]:
    snapshot = [pg_event("r", None, _row(i, f"item {i}", i, "t" * 3000 if i <= 5 else None), 100)
                for i in range(1, 21)]
    stream = [
        pg_event("u", None, _row(1, "one", 10, PLACEHOLDER), 200),       # text unchanged: from the table
        pg_event("u", None, _row(2, "two", 20, "new text " * 400), 210),
        pg_event("u", None, _row(2, "two", 21, PLACEHOLDER), 220),       # from the change before it
        pg_event("d", _row(3, None, None), None, 230), None,
        pg_event("d", _row(20, None, None), None, 240), None,            # a key change 20 -> 120:
        pg_event("c", None, _row(120, "item 20", 20), 241),              # delete, tombstone, create
        pg_event("u", None, _row(4, "stale", 0, PLACEHOLDER), 150),      # replayed, older: loses
    ]
    more = [
        pg_event("u", None, _row(1, "one again", 11, PLACEHOLDER), 300),
        pg_event("c", None, _row(3, "three is back", 3), 310),
        pg_event("u", None, _row(5, "five", 50, PLACEHOLDER), 320),
    ]
    return [snapshot, stream, more]


def test_a_debezium_table_reads_alike_in_every_reader(kafka, spark, tmp_path, hudi_sessions):
    topic = kafka.create_topic(f"pg.public.orders-{uuid.uuid4().hex[:6]}", partitions=1)
    (config,), problems = parse_pipelines(YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic,
                                                      t=tmp_path / "orders"))
    assert not problems
    model = RowModel()
    for events in _batches():
        kafka.produce(topic, [None if e is None else json.dumps(e) for e in events])
        report = PipelineRunner(config, spark=spark).run_once()
        assert report.errored == 0
        model.apply(events)
    rows = model.snapshot()
    assert all(PLACEHOLDER not in str(r["note"]) for r in rows)
    assert_readers_match(config.target.path, hudi_sessions, Expected.of_rows(rows, COLUMNS),
                         [Query("snapshot"), Query("read_optimized")])

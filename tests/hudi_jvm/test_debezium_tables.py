"""A table written from a Debezium change stream reads alike in Apache Hudi 0.15, 1.0 and
1.2, hudi-rs and ours: deletes from ``before``, log-position ordering, and unchanged
TOASTed values completed at write time (so no reader needs Hudi's Debezium payload).

The stream is the exact JSON Debezium's Postgres connector publishes, produced to the real
broker; the expected rows come from a model that applies the events in log order
(:class:`tests.support.cdc.RowModel`), not from any reader.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from decimal import Decimal

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from tests.hudi_jvm.compare import Expected, Query, assert_readers_match
from tests.support.cdc import PLACEHOLDER, RowModel, connect_envelope, pg_event

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


#: A row's columns as Debezium's Postgres connector types them in JSON with embedded
#: schemas, with its defaults (precise decimals, adaptive times).
TYPED_COLUMNS = [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "bytes", "optional": True, "field": "amount", "name": "org.apache.kafka.connect.data.Decimal",
     "parameters": {"scale": "2", "connect.decimal.precision": "12"}},
    {"type": "int32", "optional": True, "field": "born", "name": "io.debezium.time.Date"},
    {"type": "int64", "optional": True, "field": "seen", "name": "io.debezium.time.MicroTimestamp"},
    {"type": "string", "optional": True, "field": "at", "name": "io.debezium.time.ZonedTimestamp"},
    {"type": "array", "optional": True, "field": "days",
     "items": {"type": "int32", "optional": True, "name": "io.debezium.time.Date"}},
]
EPOCH = dt.date(1970, 1, 1)


def _typed(i: int, amount: str, born: dt.date, seen: dt.datetime) -> tuple[dict, dict]:
    """(the event's row as Debezium sends it, the row the table must hold)."""
    unscaled = int(Decimal(amount).scaleb(2))
    micros = (seen - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    sent = {"id": i, "amount": base64.b64encode(unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big",
                                                                   signed=True)).decode(),
            "born": (born - EPOCH).days, "seen": micros, "at": f"{seen.isoformat()}Z", "days": [(born - EPOCH).days]}
    stored = {"id": i, "amount": Decimal(amount), "born": born, "seen": seen, "at": seen, "days": [born]}
    return sent, stored


def test_database_types_from_embedded_schemas_read_alike_in_every_reader(kafka, spark, tmp_path, hudi_sessions):
    topic = kafka.create_topic(f"pg.public.kinds-{uuid.uuid4().hex[:6]}", partitions=1)
    (config,), problems = parse_pipelines(YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic,
                                                      t=tmp_path / "kinds"))
    assert not problems
    rows = [_typed(1, "-1234.50", dt.date(1969, 7, 20), dt.datetime(1969, 12, 31, 23, 59, 59, 999_999)),
            _typed(2, "9999999999.99", dt.date(2038, 1, 19), dt.datetime(2038, 1, 19, 3, 14, 8)),
            _typed(3, "0.01", dt.date(1, 1, 1), dt.datetime(1970, 1, 1))]
    update = _typed(1, "-0.01", dt.date(2000, 2, 29), dt.datetime(2000, 2, 29, 12, 0, 0, 500_000))
    batches = [[pg_event("r", None, sent, 100 + i) for i, (sent, _) in enumerate(rows)],
               [pg_event("u", None, update[0], 200), pg_event("d", {"id": 3}, None, 210), None]]
    for events in batches:
        kafka.produce(topic, [None if e is None else json.dumps(connect_envelope(e, TYPED_COLUMNS)) for e in events])
        report = PipelineRunner(config, spark=spark).run_once()
        assert report.errored == 0
    expected = [update[1], rows[1][1]]
    assert_readers_match(config.target.path, hudi_sessions, Expected.of_rows(expected, [c["field"] for c in TYPED_COLUMNS]),
                         [Query("snapshot")])

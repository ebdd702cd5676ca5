"""Debezium change events on the real broker into a table: deletes, log-position ordering
across batches and replays, tombstones counted as filtered, JSON with and without
embedded schemas, and Avro through the schema registry."""

from __future__ import annotations

import io
import json
import uuid

import fastavro
import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table
from streamer.sources.kafka.avro import confluent_frame
from tests.support.cdc import PLACEHOLDER, RowModel, pg_event
from tests.support.readers import hudi_rs_table

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

YAML = """
pipelines:
  - name: cdc
    source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic: {topic}, debezium: postgres{extra}}}
    target: {{path: "{t}", record_key: [id]}}
    trigger: {{mode: once}}
    engine: {engine}
"""

#: Two batches of changes to three keys, with a replayed older change in each; the
#: table must end as the database did: 1 at its last update, 2 re-inserted, 3 deleted.
BATCH_1 = [
    pg_event("r", None, {"id": 1, "name": "a"}, 10),
    pg_event("r", None, {"id": 2, "name": "b"}, 10),
    pg_event("c", None, {"id": 3, "name": "c"}, 20),
    pg_event("u", {"id": 1, "name": "a"}, {"id": 1, "name": "a2"}, 30),
    pg_event("d", {"id": 2, "name": None}, None, 40),
    None,  # tombstone of 2
    pg_event("u", {"id": 3, "name": "c"}, {"id": 3, "name": "c3"}, 50),
    pg_event("u", {"id": 3, "name": "c"}, {"id": 3, "name": "stale"}, 25),  # replayed, older: loses
]
BATCH_2 = [
    pg_event("u", {"id": 1, "name": "a"}, {"id": 1, "name": "stale"}, 15),  # older than the table's 30
    pg_event("c", None, {"id": 2, "name": "b again"}, 60),
    pg_event("d", {"id": 3, "name": None}, None, 70),
    None,  # tombstone of 3
]
FINAL = {1: "a2", 2: "b again"}


def wrap(event: dict | None) -> dict | None:
    """As Kafka Connect's JsonConverter writes it with ``schemas.enable=true``."""
    if event is None:
        return None
    return {"schema": {"type": "struct", "name": "pg.public.orders.Envelope", "optional": False}, "payload": event}


def _run(kafka, spark, tmp_path, produce, extra: str = "", engine: str = "local"):
    topic = kafka.create_topic(f"pg.public.orders-{uuid.uuid4().hex[:6]}", partitions=1)
    (config,), problems = parse_pipelines(YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic,
                                                      t=tmp_path / "t", extra=extra, engine=engine))
    assert not problems and config.target.ordering_field == "_event_lsn"
    reports = []
    for batch in (BATCH_1, BATCH_2):
        produce(topic, batch)
        reports.append(PipelineRunner(config, spark=spark).run_once())
    rows = Table.open(config.target.path).read().to_pylist()
    return config, reports, rows


@pytest.mark.parametrize("embedded", [False, True], ids=["json", "json-with-schemas"])
def test_change_events_end_as_the_database_did(kafka, spark, tmp_path, embedded):
    def produce(topic, events):
        values = [None if e is None else json.dumps(wrap(e) if embedded else e) for e in events]
        kafka.produce(topic, values, keys=[json.dumps({"id": 0})] * len(values))

    config, reports, rows = _run(kafka, spark, tmp_path, produce)
    assert [(r.read, r.errored, r.filtered) for r in reports] == [(8, 0, 1), (4, 0, 1)]
    assert {r["id"]: r["name"] for r in rows} == FINAL
    assert len(rows) == len(FINAL)  # no duplicate key
    by_id = {r["id"]: r for r in rows}
    assert (by_id[1]["_event_lsn"], by_id[1]["_change_operation_type"]) == (30, "u")
    assert by_id[2]["_hoodie_is_deleted"] is False
    assert not (tmp_path / "_errors").exists() or not any((tmp_path / "_errors").rglob("*.parquet"))


def test_change_events_on_the_spark_engine(kafka, spark, tmp_path):
    def produce(topic, events):
        kafka.produce(topic, [None if e is None else json.dumps(e) for e in events])

    _, reports, rows = _run(kafka, spark, tmp_path, produce, engine="spark")
    assert [r.filtered for r in reports] == [1, 1]
    assert {r["id"]: r["name"] for r in rows} == FINAL and len(rows) == len(FINAL)


def _envelope_schema() -> dict:
    row = {"type": "record", "name": "Value", "namespace": "pg.public.orders", "fields": [
        {"name": "id", "type": "int"}, {"name": "name", "type": ["null", "string"], "default": None}]}
    source = {"type": "record", "name": "Source", "namespace": "io.debezium.connector.postgresql", "fields": [
        {"name": f, "type": ["null", t], "default": None} for f, t in (
            ("version", "string"), ("connector", "string"), ("name", "string"), ("ts_ms", "long"),
            ("db", "string"), ("schema", "string"), ("table", "string"), ("txId", "long"), ("lsn", "long"),
            ("xmin", "long"))]}
    return {"type": "record", "name": "Envelope", "namespace": "pg.public.orders", "fields": [
        {"name": "before", "type": ["null", row], "default": None},
        {"name": "after", "type": ["null", "pg.public.orders.Value"], "default": None},
        {"name": "source", "type": source},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None}]}


def test_avro_change_events_through_the_registry(kafka, spark, tmp_path, schema_registry):
    schema = _envelope_schema()
    parsed = fastavro.parse_schema(schema)

    def produce(topic, events):
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

        client = SchemaRegistryClient({"url": schema_registry.url, "timeout": 10})
        schema_id = client.register_schema(f"{topic}-value", Schema(json.dumps(schema), "AVRO"))
        values = []
        for e in events:
            if e is None:
                values.append(None)
                continue
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, parsed, e)
            values.append(confluent_frame(schema_id, buf.getvalue()))
        kafka.produce(topic, values)

    extra = f', format: avro, schema_registry: {{url: "{schema_registry.url}"}}'
    _, reports, rows = _run(kafka, spark, tmp_path, produce, extra=extra)
    assert [(r.read, r.errored, r.filtered) for r in reports] == [(8, 0, 1), (4, 0, 1)]
    assert {r["id"]: r["name"] for r in rows} == FINAL and len(rows) == len(FINAL)


@pytest.mark.parametrize("embedded", [False, True], ids=["json", "json-with-schemas"])
def test_the_shape_of_a_whole_batch_is_read_not_a_sample_of_it(kafka, spark, tmp_path, embedded):
    """A batch whose first events are all creates, then a column added mid-batch and
    deletes (``before`` only): with a sample of the first records (the non-Debezium
    default) the added column and the deletes' keys were lost."""
    events = [pg_event("r", None, {"id": i, "name": f"n{i}"}, 10) for i in range(1, 9)]
    events += [pg_event("u", None, {"id": 1, "name": "n1", "color": "red"}, 20),
               pg_event("d", {"id": 2, "name": None}, None, 30), None,
               # not a batch's last change: a trailing delete of a key the batch made waits for the
               # next batch (streamer.pipeline.held_back)
               pg_event("u", None, {"id": 4, "name": "n4"}, 40)]

    def produce(topic, batch):
        values = [None if e is None else json.dumps(wrap(e) if embedded else e) for e in batch]
        kafka.produce(topic, values, keys=[json.dumps({"id": 0})] * len(values))

    topic = kafka.create_topic(f"pg.public.orders-{uuid.uuid4().hex[:6]}", partitions=1)
    (config,), problems = parse_pipelines(YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic,
                                                      t=tmp_path / "t", extra=", infer_sample_records: 4",
                                                      engine="local"))
    assert not problems
    produce(topic, events)
    report = PipelineRunner(config, spark=spark).run_once()
    assert (report.errored, report.filtered) == (0, 1)
    rows = {r["id"]: r for r in Table.open(config.target.path).read().to_pylist()}
    assert sorted(rows) == [1, 3, 4, 5, 6, 7, 8] and rows[1]["color"] == "red" and rows[3]["color"] is None


#: A key inserted, then renamed (delete, tombstone, create whose TOASTed note is the
#: placeholder): a batch cap of 4 ends the first batch after the tombstone.
KEY_CHANGE = [pg_event("c", None, {"id": 1, "note": "one"}, 10),
              pg_event("c", None, {"id": 7, "note": "seven's long text"}, 20),
              pg_event("d", {"id": 7, "note": None}, None, 30),
              None,
              pg_event("c", None, {"id": 1_000_007, "note": PLACEHOLDER}, 30),
              pg_event("u", {"id": 1, "note": None}, {"id": 1, "note": PLACEHOLDER}, 40)]
KEY_CHANGED = {1: "one", 1_000_007: "seven's long text"}


def _key_change_pipeline(kafka, tmp_path, engine: str, trigger: str = "{mode: once}",
                         produce: list | None = None):
    topic = kafka.create_topic(f"pg.public.orders-{uuid.uuid4().hex[:6]}", partitions=1)
    text = YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic, t=tmp_path / "t",
                       extra=", max_records_per_batch: 4", engine=engine)
    (config,), problems = parse_pipelines(text.replace("{mode: once}", trigger))
    assert not problems
    kafka.produce(topic, [None if e is None else json.dumps(e) for e in (KEY_CHANGE if produce is None else produce)])
    return config


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_batch_never_ends_between_a_key_changes_delete_and_its_create(kafka, spark, tmp_path, engine):
    """A batch that inserts a key and ends just after that key's primary-key change (its
    delete and tombstone) would commit the net delete, and the create in the next batch,
    whose TOASTed note is Debezium's placeholder, would find the old row nowhere: the new
    key went to the error table. The tail is held back to the next batch (module
    ``streamer.pipeline.held_back``), which finds the old row committed."""
    config = _key_change_pipeline(kafka, tmp_path, engine)
    runner = PipelineRunner(config, spark=spark)
    first = runner.run_once()
    # the delete and its tombstone are left to the next batch, which reads them again
    assert (first.written, first.errored, json.loads(first.position)["partitions"]) == (2, 0, {"0": 2})
    reports = runner.run_available_now()
    assert sum(r.errored for r in reports) == 0
    rows = _notes(config.target.path)
    assert rows == KEY_CHANGED
    assert json.loads(reports[-1].position)["partitions"] == {"0": 6}
    # one partition: no delete is committed on its own (its create follows it there)
    writes = Table.open(config.target.path).timeline.completed_writes()
    assert len(writes) == 1 + sum(1 for r in reports if r.instant)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_once_run_applies_the_delete_its_batch_held_back(kafka, spark, tmp_path, engine):
    """A ``trigger.mode: once`` run whose batch holds a trailing delete back reads it again
    in one more batch: the run ends with the table as the database was (7 deleted), not
    with a row the database has deleted until the next run. The rename's create, published
    later, still finds the old row in the commit before that delete."""
    config = _key_change_pipeline(kafka, tmp_path, engine, produce=KEY_CHANGE[:4])
    runner = PipelineRunner(config, spark=spark)
    reports = runner.run_trigger_once()
    assert [json.loads(r.position)["partitions"] for r in reports] == [{"0": 2}, {"0": 4}]
    assert [(r.written, r.errored) for r in reports] == [(2, 0), (1, 0)]
    assert _notes(config.target.path) == {1: "one"}
    kafka.produce(config.source.topic, [json.dumps(e) for e in KEY_CHANGE[4:]])
    later = PipelineRunner(config, spark=spark).run_trigger_once()
    assert [(r.written, r.errored) for r in later] == [(2, 0)]
    assert _notes(config.target.path) == KEY_CHANGED


def test_a_streamed_micro_batch_reads_the_records_the_last_one_held_back(kafka, spark, tmp_path):
    """In ``read: stream`` Spark's stream is past the held-back records: the next
    micro-batch reads them again before its own."""
    config = _key_change_pipeline(kafka, tmp_path, "local", "{mode: continuous, interval: 1s, read: stream}")
    runner = PipelineRunner(config, spark=spark)
    runner.run_continuous(max_batches=2, timeout_s=120)
    assert [json.loads(r.position)["partitions"] for r in runner.reports] == [{"0": 2}, {"0": 6}]
    assert sum(r.errored for r in runner.reports) == 0
    rows = _notes(config.target.path)
    assert rows == KEY_CHANGED


def test_a_postgres_topic_of_several_partitions_is_warned_about(kafka, tmp_path, caplog):
    """A key change's delete and create are paired within one partition, and Debezium keys
    each record by its primary key: on several partitions the two usually part, and the
    create's unchanged TOASTed values may not be completed. A run's preflight says so,
    naming the topic; one partition, or another connector, is not warned about."""
    import logging

    from streamer.sources.kafka.source import KafkaSource

    several = kafka.create_topic(f"pg.public.orders-{uuid.uuid4().hex[:6]}", partitions=3)
    one = kafka.create_topic(f"pg.public.orders-{uuid.uuid4().hex[:6]}", partitions=1)
    for topic, debezium in ((several, "postgres"), (one, "postgres"), (several, "mysql")):
        (config,), problems = parse_pipelines(YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic,
                                                          t=tmp_path / "t", extra="", engine="local")
                                              .replace("debezium: postgres", f"debezium: {debezium}"))
        assert not problems
        with caplog.at_level(logging.WARNING, logger="streamer.sources.kafka.source"):
            KafkaSource(config.source).preflight()
    warned = [r.getMessage() for r in caplog.records if "partitions" in r.getMessage()]
    assert len(warned) == 1 and several in warned[0] and "of 3 partitions" in warned[0], warned


def _notes(path: str) -> dict:
    """Each row's note by id as our reader reads the table, checked equal to hudi-rs's
    read (the caller checks it against what the database has)."""
    ours = {r["id"]: r["note"] for r in Table.open(path).read().to_pylist()}
    theirs = hudi_rs_table(path)
    assert {r["id"]: r["note"] for r in (theirs.to_pylist() if theirs is not None else [])} == ours, "hudi-rs"
    return ours


def _sent(op: str, before: dict | None, after: dict | None, lsn: int) -> dict:
    """:func:`pg_event` sent by the connector at a time that follows the log, as Debezium's
    ``ts_ms`` does (the waits of ``streamer.pipeline.held_back`` read it)."""
    return pg_event(op, before, after, lsn, ts_ms=1_700_000_000_000 + lsn)


#: A key renamed on a topic of two partitions, as Debezium keys it: the old key's changes
#: and delete in partition 0 behind two creates of other keys, the new key's create (its
#: TOASTed note the placeholder) and a later update in partition 1.
OLD_KEY_SIDE = [_sent("c", None, {"id": 7, "note": "seven"}, 10),
                *(_sent("c", None, {"id": i, "note": f"n{i}"}, 10 + i) for i in range(1, 3)),
                _sent("u", {"id": 7, "note": None}, {"id": 7, "note": "seven, edited"}, 20),
                _sent("d", {"id": 7, "note": None}, None, 30),
                None]
NEW_KEY_SIDE = [_sent("c", None, {"id": 1_000_007, "note": PLACEHOLDER}, 30),
                _sent("u", {"id": 1_000_007, "note": None}, {"id": 1_000_007, "note": PLACEHOLDER}, 40)]


def _two_partitions(kafka, tmp_path, engine: str):
    topic = kafka.create_topic(f"pg.public.orders-{uuid.uuid4().hex[:6]}", partitions=2)
    (config,), problems = parse_pipelines(YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic, t=tmp_path / "t",
                                                      extra=", max_records_per_batch: 4", engine=engine))
    assert not problems
    for partition, events in ((0, OLD_KEY_SIDE), (1, NEW_KEY_SIDE)):
        kafka.produce(topic, [None if e is None else json.dumps(e) for e in events], partition=partition)
    return config


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_key_changes_create_read_before_its_delete_waits_for_it(kafka, spark, tmp_path, engine):
    """The batch cap shares a batch among the partitions by their backlog: the first batch
    reads the new key's create and only the first three records of partition 0. The create
    cannot be completed yet, and went to the error table; its partition now waits for the
    batch reaching the delete, which completes it with the old key's last text. That
    batch's delete, trailing and of a key it also changed, is not held back: its create is
    in the batch."""
    config = _two_partitions(kafka, tmp_path, engine)
    reports = PipelineRunner(config, spark=spark).run_available_now()
    assert sum(r.errored for r in reports) == 0
    # the second batch reads the delete (its create waiting in partition 1) and completes the create
    assert [json.loads(r.position)["partitions"] for r in reports][:2] == [{"0": 3, "1": 0}, {"0": 6, "1": 1}]
    assert json.loads(reports[-1].position)["partitions"] == {"0": 6, "1": 2}
    model = RowModel()
    model.apply([*OLD_KEY_SIDE, *NEW_KEY_SIDE])  # the database's rows, from the events alone
    rows = _notes(config.target.path)
    assert rows == {r["id"]: r["note"] for r in model.snapshot()}
    assert rows[1_000_007] == "seven, edited"


def test_a_once_run_leaves_a_create_waiting_for_its_delete_to_the_next_run(kafka, spark, tmp_path):
    """A ``trigger.mode: once`` run whose batch held a create back for its delete does not
    read that partition again in its one more batch (it would read no further in partition
    0, and the create would go to the error table): the next runs go on to the delete."""
    config = _two_partitions(kafka, tmp_path, "local")
    first = PipelineRunner(config, spark=spark).run_trigger_once()
    assert [(r.errored, json.loads(r.position)["partitions"]) for r in first] == [(0, {"0": 3, "1": 0})]
    for _ in range(3):
        PipelineRunner(config, spark=spark).run_trigger_once()
    rows = _notes(config.target.path)
    assert rows[1_000_007] == "seven, edited" and 7 not in rows


#: A key edited then renamed, the delete followed by more changes in partition 0, and the
#: create behind ten other creates in partition 1: the first capped batch reads the
#: delete but not the create.
EDITED_OLD_SIDE = [_sent("c", None, {"id": 7, "note": "seven"}, 10),
                   _sent("u", {"id": 7, "note": None}, {"id": 7, "note": "seven, edited"}, 20),
                   _sent("d", {"id": 7, "note": None}, None, 30),
                   None,
                   *(_sent("c", None, {"id": i, "note": f"n{i}"}, 30 + i) for i in range(1, 7))]
EDITED_NEW_SIDE = [*(_sent("c", None, {"id": 100 + i, "note": f"m{i}"}, i) for i in range(1, 11)),
                   *NEW_KEY_SIDE]


def _edited_then_renamed(kafka, spark, tmp_path, engine: str):
    """The pipeline after a first run committed key 7's insert, the rest produced."""
    topic = kafka.create_topic(f"pg.public.orders-{uuid.uuid4().hex[:6]}", partitions=2)
    (config,), problems = parse_pipelines(YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic, t=tmp_path / "t",
                                                      extra=", max_records_per_batch: 12", engine=engine))
    assert not problems
    kafka.produce(topic, [json.dumps(EDITED_OLD_SIDE[0])], partition=0)
    assert PipelineRunner(config, spark=spark).run_once().written == 1
    for partition, events in ((0, EDITED_OLD_SIDE[1:]), (1, EDITED_NEW_SIDE)):
        kafka.produce(topic, [None if e is None else json.dumps(e) for e in events], partition=partition)
    model = RowModel()
    model.apply([*EDITED_OLD_SIDE, *EDITED_NEW_SIDE])  # the database's rows, from the events alone
    return config, {r["id"]: r["note"] for r in model.snapshot()}


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_key_changes_delete_read_before_its_create_keeps_the_old_keys_last_value(kafka, spark, tmp_path, engine):
    """A batch edits key 7, then deletes it (a rename whose create it does not read): the
    edit merged into the net delete reached no commit, and the create, in the next batch,
    took the text from before the edit, with no error. The delete is now committed after
    the batch's other rows, so the commit before it holds the edit."""
    config, expected = _edited_then_renamed(kafka, spark, tmp_path, engine)
    reports = PipelineRunner(config, spark=spark).run_available_now()
    assert json.loads(reports[0].position)["partitions"] == {"0": 6, "1": 7}  # the delete read, not the create
    assert sum(r.errored for r in reports) == 0
    rows = _notes(config.target.path)
    assert rows == expected and rows[1_000_007] == "seven, edited"
    # the first run's commit, then the batch's two (its delete on its own), then the rest's
    writes = Table.open(config.target.path).timeline.completed_writes()
    assert len(writes) == 2 + len(reports)
    assert (reports[0].first_instant, reports[0].instant) == (writes[1].timestamp, writes[2].timestamp)
    assert reports[0].files_written >= 2  # each of the two commits wrote a file


def test_a_crash_between_a_batchs_two_commits_reads_the_delete_again(kafka, spark, tmp_path, monkeypatch):
    """The first of the two commits carries the delete's position: a run that stops
    before the second reads the delete again, and the table still ends as the database."""
    config, expected = _edited_then_renamed(kafka, spark, tmp_path, "local")
    calls = []
    real = PipelineRunner._commit

    def crash_on_the_second(self, *args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise RuntimeError("crashed between the two commits")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(PipelineRunner, "_commit", crash_on_the_second)
    with pytest.raises(RuntimeError, match="between the two commits"):
        PipelineRunner(config, spark=spark).run_once()
    monkeypatch.setattr(PipelineRunner, "_commit", real)
    kept = _notes(config.target.path)
    assert kept[7] == "seven, edited"  # the first commit: the edit, without its delete
    reports = PipelineRunner(config, spark=spark).run_available_now()
    assert json.loads(reports[0].start_position)["partitions"] == {"0": 2, "1": 7}  # from the delete
    assert sum(r.errored for r in reports) == 0
    rows = _notes(config.target.path)
    assert rows == expected

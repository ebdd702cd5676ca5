"""Debezium change events → table rows (sources/debezium.py), on Spark without a broker."""

from __future__ import annotations

import json

import pytest

from streamer.config import parse_pipelines
from streamer.sources.debezium import change_rows, metadata_columns
from tests.support.cdc import pg_event

pytestmark = pytest.mark.integration


def frame(spark, values: list[dict | None]):
    """Values decoded as the Kafka JSON decode does (a tombstone is a row of nulls)."""
    texts = [json.dumps(v) for v in values if v is not None]
    df = spark.read.json(spark.sparkContext.parallelize(texts, 1))
    tombstones = sum(v is None for v in values)
    if tombstones:
        df = df.unionByName(spark.createDataFrame([tuple([None] * len(df.columns))] * tombstones, df.schema))
    return df


def test_postgres_events_become_rows_deletes_and_skipped_tombstones(spark):
    events = [
        pg_event("r", None, {"id": 1, "name": "a", "qty": 1}, 10),
        pg_event("c", None, {"id": 2, "name": "b", "qty": 2}, 20),
        pg_event("u", {"id": 1, "name": None, "qty": None}, {"id": 1, "name": "a2", "qty": 3}, 30),
        pg_event("d", {"id": 2, "name": None, "qty": None}, None, 40),
        None,  # the tombstone after the delete
        {**pg_event("t", None, None, 50)},  # a truncate changes no row of its own
    ]
    rows = change_rows(frame(spark, events), "postgres")
    assert rows.columns == [*metadata_columns("postgres"), "id", "name", "qty", "_hoodie_is_deleted"]
    got = sorted((r._event_lsn, r._change_operation_type, r.id, r.name, r._hoodie_is_deleted)
                 for r in rows.collect())
    assert got == [(10, "r", 1, "a", False), (20, "c", 2, "b", False), (30, "u", 1, "a2", False),
                   (40, "d", 2, None, True)]
    first = rows.where("_event_lsn = 10").first()
    assert (first.db_shard_source_partition, first.db_schema_source_partition, first._event_tx_id,
            first._event_origin_ts_ms, first._upstream_event_processed_ts_ms) == (
        "pg", "public", 7, 1_700_000_000_000, 1_700_000_000_123)
    assert dict(rows.dtypes)["_event_lsn"] == "bigint"


def test_embedded_schemas_payload_is_unwrapped(spark):
    plain = [pg_event("c", None, {"id": 1, "name": "a"}, 10), pg_event("d", {"id": 1, "name": None}, None, 20)]
    wrapped = [{"schema": {"type": "struct", "optional": False, "name": "pg.public.orders.Envelope"},
                "payload": e} for e in plain]
    a = change_rows(frame(spark, plain), "postgres").collect()
    b = change_rows(frame(spark, wrapped), "postgres").collect()
    assert sorted(map(tuple, a)) == sorted(map(tuple, b)) and len(a) == 2


def test_columns_beside_the_envelope_pass_through(spark):
    from pyspark.sql import functions as F

    events = frame(spark, [pg_event("c", None, {"id": 1}, 10)]).withColumn("_kafka_offset", F.lit(41))
    (row,) = change_rows(events, "postgres").collect()
    assert (row.id, row._kafka_offset) == (1, 41)


def test_a_batch_of_deletes_only_takes_its_columns_from_before(spark):
    events = [pg_event("d", {"id": 5, "name": None}, None, 90), None]
    (row,) = change_rows(frame(spark, events), "postgres").collect()
    assert (row.id, row._hoodie_is_deleted, row._event_lsn) == (5, True, 90)


def test_mysql_sequence_orders_by_binlog_file_then_position_as_numbers(spark):
    def my_event(file: str, pos: int, row: int, key: int) -> dict:
        source = {"connector": "mysql", "name": "my", "ts_ms": 1, "file": file, "pos": pos, "row": row}
        return {"before": None, "after": {"id": key}, "source": source, "op": "c", "ts_ms": 2}

    events = [my_event("mysql-bin.000009", 300, 0, 1), my_event("mysql-bin.000009", 1200, 0, 2),
              my_event("mysql-bin.000010", 4, 1, 3)]
    rows = change_rows(frame(spark, events), "mysql")
    assert rows.columns == [*metadata_columns("mysql"), "id", "_hoodie_is_deleted"]
    seq = {r.id: r._event_seq for r in rows.collect()}
    # as text Hudi's "000009.1200" sorts before "000009.300"; as numbers it does not
    assert seq[1] < seq[2] < seq[3]
    assert seq[3] == (10 << 32) + 4


def test_mariadb_events_are_mysql_events(spark):
    """Debezium's MariaDB connector (``source.connector: mariadb``, as 3.5.0 sent these from
    MariaDB 10.11) is taken by ``debezium: mysql``: the same binlog fields, ordered the same."""
    def maria_event(op: str, before: dict | None, after: dict | None, pos: int, *, gtid: str | None = "0-1-6",
                    snapshot: str = "false") -> dict:
        source = {"version": "3.5.0.Final", "connector": "mariadb", "name": "my1", "ts_ms": 1796160650000,
                  "snapshot": snapshot, "db": "shop", "sequence": None, "ts_us": 1796160650000000,
                  "ts_ns": 1796160650000000000, "table": "orders", "server_id": 1, "gtid": gtid,
                  "file": "binlog.000001", "pos": pos, "row": 0, "thread": None, "query": None}
        return {"before": before, "after": after, "source": source, "transaction": None, "op": op,
                "ts_ms": 1796160651009, "ts_us": 1796160651009641, "ts_ns": 1796160651009641780}

    a, b, c = ({"id": 1, "note": n, "amount": "1.50", "placed": 1704067200500000} for n in "abc")
    events = [
        maria_event("r", None, a, 1372, gtid=None, snapshot="last"),
        # one transaction, one second: the binlog position alone orders the two updates
        maria_event("u", b, c, 1724), maria_event("u", a, b, 1530),
        maria_event("d", c, None, 1987, gtid="0-1-7"), None,
    ]
    rows = change_rows(frame(spark, events), "mysql")
    meta = list(metadata_columns("mysql"))
    assert rows.columns[:len(meta)] == meta and rows.columns[-1] == "_hoodie_is_deleted"
    assert sorted(rows.columns[len(meta):-1]) == ["amount", "id", "note", "placed"]
    got = sorted((r._event_seq, r._change_operation_type, r.note, r._hoodie_is_deleted) for r in rows.collect())
    assert got == [((1 << 32) + 1372, "r", "a", False), ((1 << 32) + 1530, "u", "b", False),
                   ((1 << 32) + 1724, "u", "c", False), ((1 << 32) + 1987, "d", "c", True)]
    first = rows.where("_event_pos = 1372").first()
    assert (first._event_bin_file, first._event_row, first._event_origin_ts_ms, first.db_shard_source_partition) == (
        "binlog.000001", 0, 1796160650000, "my1")


def test_values_that_are_not_change_events_are_refused_by_name(spark):
    df = spark.createDataFrame([(1, "a")], "id INT, name STRING")
    with pytest.raises(ValueError, match=r"not Debezium change events: no field\(s\) \['op', 'after'"):
        change_rows(df, "postgres")


def test_a_column_named_as_a_metadata_column_is_refused(spark):
    events = [pg_event("c", None, {"id": 1, "_event_lsn": 3}, 10)]
    with pytest.raises(ValueError, match="_event_lsn"):
        change_rows(frame(spark, events), "postgres")


YAML = """
pipelines:
  - name: cdc
    source: {{type: kafka, bootstrap_servers: "127.0.0.1:9", topic: pg.public.orders, debezium: {db}}}
    target: {{path: /tmp/t, record_key: [id]{extra}}}
"""


@pytest.mark.parametrize(("db", "extra", "ordering"), [
    ("postgres", "", "_event_lsn"), ("mysql", "", "_event_seq"), ("postgres", ", ordering_field: ts", "ts")])
def test_a_change_stream_orders_by_the_log_position_unless_told(db, extra, ordering):
    (config,), problems = parse_pipelines(YAML.format(db=db, extra=extra))
    assert not problems
    assert config.target.ordering_field == ordering


def test_a_batch_of_tombstones_only_changes_no_row(spark):
    """A batch can end between a delete and its tombstone: the next may hold tombstones
    only, which the JSON decoder gives as one ``value`` column of nulls (nothing to learn a
    shape from). No row, and the columns every change batch has; a ``value`` that is not
    null is still no Debezium event."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField("value", StringType())])
    nulls = spark.createDataFrame([(None,), (None,)], schema).withColumn("_kafka_offset", F.lit(7))
    rows = change_rows(nulls, "postgres")
    assert rows.count() == 0
    assert rows.columns == [*metadata_columns("postgres"), "_hoodie_is_deleted", "_kafka_offset"]
    assert dict(rows.dtypes)["_event_lsn"] == "bigint"
    assert dict(change_rows(nulls, "mysql").dtypes)["_event_seq"] == "bigint"
    with pytest.raises(ValueError, match="not Debezium change events"):
        change_rows(spark.createDataFrame([("x",)], schema), "postgres")


def test_an_incremental_snapshot_read_without_an_lsn_ranks_below_every_change(spark):
    """Debezium's incremental snapshot sends its reads with a null ``source.lsn``: they get
    ``_event_lsn`` 0 (below any streamed change), not a null ordering value, which sent
    every backfilled row to the error table. A change's null LSN stays null."""
    read = pg_event("r", None, {"id": 1, "name": "a"}, 10)
    read["source"]["lsn"] = None
    change = pg_event("u", None, {"id": 2, "name": "b"}, 20)
    change["source"]["lsn"] = None
    rows = change_rows(frame(spark, [read, change, pg_event("c", None, {"id": 3, "name": "c"}, 30)]), "postgres")
    assert sorted((r.id, r._event_lsn) for r in rows.collect()) == [(1, 0), (2, None), (3, 30)]

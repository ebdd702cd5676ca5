"""MariaDB → Debezium (Kafka Connect) → the real broker → our pipeline (``source.debezium:
mysql``) → a table that equals ``SELECT * FROM orders``, read by hudi-rs and by our reader:
the snapshot (op r), then inserts, updates, deletes, a key change, a multi-statement
transaction and two updates of one row in one transaction (one ``ts_ms``: the binlog
position orders them), over three runs.

The server is Debian's MariaDB 10.11 (``make setup`` installs it; Debian has no Oracle
MySQL), captured by Debezium's MariaDB connector: Debezium 3.6's MySQL connector refuses a
MariaDB server (docs/cdc-mysql.md).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest

from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table
from tests.support.binlog import capture_binlog, change_pipeline, topic_events
from tests.support.cdc import wait_for_events

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

COLUMNS = ("id", "name", "note", "amount", "placed")
#: 30 rows: texts long (rows 1-3, 20,000 characters), with a newline, a tab, quotes and
#: non-ASCII characters, or NULL; negative and zero amounts; microsecond datetimes.
SETUP = (
    "CREATE TABLE orders (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, note TEXT, amount DECIMAL(12,2),"
    " placed DATETIME(6));"
    "INSERT INTO orders SELECT seq, CONCAT('item ', seq),"
    " CASE WHEN seq <= 3 THEN REPEAT(CHAR(64 + seq), 20000) WHEN seq % 5 = 0 THEN NULL"
    "      ELSE CONCAT('note \"', seq, '\"\\n\\tgrüße ✓') END,"
    " (CAST(seq AS SIGNED) - 10) * 12.25, '2024-02-29 23:59:59.999999' + INTERVAL seq * 1000003 MICROSECOND"
    " FROM seq_1_to_30"
)


def _as_text(value: object, column: str) -> str | None:
    """A value of the lake's row as MariaDB prints the column: the DATETIME(6) Debezium
    sends as microseconds since the epoch (the wall time, no zone), the rest as is."""
    if value is None:
        return None
    if column == "placed":
        assert isinstance(value, int), f"placed: {value!r}"
        return (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=value)).strftime(
            "%Y-%m-%d %H:%M:%S.%f")
    return str(value)


def _read_hudi_rs(path: str) -> pa.Table:
    import hudi

    batches = hudi.HudiTableBuilder.from_base_uri(path).build().read()
    return pa.Table.from_batches(batches)


def _read_ours(path: str) -> pa.Table:
    return Table.open(path).read()


def _lake(path: str, reader) -> dict[str, dict[str, str | None]]:
    rows = reader(path).select(list(COLUMNS)).to_pylist()
    out = {str(r["id"]): {c: _as_text(r[c], c) for c in COLUMNS} for r in rows}
    assert len(out) == len(rows), f"{reader.__name__}: a key is in the table twice"
    return out


def _database(mariadb, db: str) -> dict[str, dict[str, str | None]]:
    rows = mariadb.rows("SELECT * FROM orders ORDER BY id", database=db)
    assert rows and tuple(rows[0]) == COLUMNS
    return {r["id"]: r for r in rows}


def _assert_lake_is_database(path: str, mariadb, db: str) -> dict[str, dict[str, str | None]]:
    expected = _database(mariadb, db)
    for reader in (_read_hudi_rs, _read_ours):
        got = _lake(path, reader)
        missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
        wrong = sorted(k for k in set(got) & set(expected) if got[k] != expected[k])
        assert not (missing or extra or wrong), (
            f"{reader.__name__}: {len(missing)} missing {missing[:5]}, {len(extra)} not in MariaDB {extra[:5]}, "
            f"{len(wrong)} differ: {[(got[k], expected[k]) for k in wrong[:2]]}")
    return expected


def _changes(kafka, topic: str, key: int, *ops: str) -> list[dict]:
    """The change events of row ``key`` with one of ``ops``, in the topic's order."""
    events = [e for e in topic_events(kafka, topic) if e is not None and e["op"] in ops]
    return [e for e in events if (e["after"] if e["op"] != "d" else e["before"])["id"] == key]


def test_a_mariadb_table_arrives_as_the_database_has_it(kafka, kafka_connect, mariadb, spark, tmp_path):
    tag = uuid.uuid4().hex[:6]
    db, prefix = f"shop_{tag}", f"my{tag}"
    topic = f"{prefix}.{db}.orders"
    capture_binlog(mariadb, kafka_connect, kafka, db=db, prefix=prefix, setup=SETUP)
    try:
        config = change_pipeline(kafka.bootstrap_servers, topic, tmp_path / "orders", debezium="mysql")
        assert config.target.ordering_field == "_event_seq"
        wait_for_events(kafka, topic, 30)  # the snapshot: op r
        report = PipelineRunner(config, spark=spark).run_once()
        assert (report.read, report.errored, report.filtered) == (30, 0, 0)
        rows = _assert_lake_is_database(config.target.path, mariadb, db)
        assert len(rows["2"]["note"] or "") == 20000 and rows["5"]["note"] is None

        sql = (
            # inserts (3), one statement updating 5 rows (one binlog event, rows 0-4)
            "INSERT INTO orders VALUES (101, 'new', 'fresh', 0.01, '2000-01-01 00:00:00.000001'),"
            " (102, 'new', NULL, NULL, NULL), (103, 'new', '', -0.50, '1999-12-31 23:59:59');"
            "UPDATE orders SET amount = amount * 10, placed = placed + INTERVAL 1 DAY WHERE id <= 5;"
            # deletes (3, each with its tombstone), a key change (delete, tombstone, create)
            "DELETE FROM orders WHERE id BETWEEN 21 AND 23;"
            "UPDATE orders SET id = 100 WHERE id = 30;"
            # one transaction of several statements: insert, update, delete (c, u, d + tombstone)
            "BEGIN; INSERT INTO orders VALUES (104, 'tx', 'in a transaction', 4.00, NOW(6));"
            " UPDATE orders SET note = NULL, amount = NULL WHERE id = 6; DELETE FROM orders WHERE id = 7; COMMIT;"
            # two updates of one row in one transaction (one ts_ms): the later one wins
            "BEGIN; UPDATE orders SET name = 'v1', amount = 1.00 WHERE id = 11;"
            " UPDATE orders SET name = 'v2', note = CONCAT(note, ' again') WHERE id = 11; COMMIT;"
            # and a row inserted and deleted in one transaction
            "BEGIN; INSERT INTO orders VALUES (105, 'gone', NULL, NULL, NULL); DELETE FROM orders WHERE id = 105; COMMIT"
        )
        mariadb.sql(sql, database=db)
        streamed = 3 + 5 + 3 * 2 + 3 + 4 + 2 + 3
        tombstones = 3 + 1 + 1 + 1
        wait_for_events(kafka, topic, 30 + streamed)
        report = PipelineRunner(config, spark=spark).run_once()
        assert (report.read, report.errored, report.filtered) == (streamed, 0, tombstones)
        rows = _assert_lake_is_database(config.target.path, mariadb, db)
        assert rows["11"]["name"] == "v2" and rows["11"]["amount"] == "1.00" and rows["11"]["note"].endswith(" again")
        assert not {"7", "21", "22", "23", "30", "105"} & set(rows)
        # what made it a test of the order: the two updates of row 11 have one ts_ms (the
        # binary log keeps seconds), the later binlog position, and reached Kafka in order
        v1, v2 = (e["source"] for e in _changes(kafka, topic, 11, "u"))
        assert v1["ts_ms"] == v2["ts_ms"] and (v1["file"], v1["pos"]) < (v2["file"], v2["pos"])
        assert v1["connector"] == "mariadb"

        # a third run on the table as it now stands, written again over its logs
        # and one statement moving keys 19, 20 to 20, 21: key 20 is deleted (row 0 of the binlog
        # event) and created (row 1) at one binlog position
        mariadb.sql("UPDATE orders SET amount = -1 WHERE id % 7 = 0; DELETE FROM orders WHERE id = 100;"
                    "INSERT INTO orders VALUES (30, 'back', 'again', 30.00, '2030-01-01 00:00:00');"
                    "UPDATE orders SET id = id + 1 WHERE id IN (19, 20) ORDER BY id DESC", database=db)
        sevens = len([k for k in rows if int(k) % 7 == 0])
        wait_for_events(kafka, topic, 30 + streamed + sevens + 2 + 1 + 2 * 3)
        PipelineRunner(config, spark=spark).run_once()
        rows = _assert_lake_is_database(config.target.path, mariadb, db)
        assert rows["20"]["name"] == "item 19" and rows["21"]["name"] == "item 20"
        gone, back = (e["source"] for e in _changes(kafka, topic, 20, "d", "c")[-2:])
        assert (gone["file"], gone["pos"], gone["row"]) == (back["file"], back["pos"], back["row"] - 1)
    finally:  # before the session stops the server under it (a worker then stops slowly)
        kafka_connect.delete(prefix)

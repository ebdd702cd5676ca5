"""A whole Postgres database from one pipeline: every table's topic into its own table,
keyed by its primary key, a table created mid-run picked up without a restart, and a
table without a primary key refused by name while the others go on."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.database import DatabaseTables
from streamer.pipeline.multi import PipelinesFailedError, run_pipelines
from streamer.read import Table
from tests.support.cdc import capture

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

YAML = r"""
pipelines:
  - name: shop
    source:
      type: kafka
      bootstrap_servers: "{bootstrap}"
      topic_pattern: '{prefix}\.public\..*'
      debezium: postgres
      discover_every: 1s
    target: {{path: "{lake}/{{table}}"}}
    trigger: {{mode: continuous, interval: 1s}}
    engine: local
"""


def _db_rows(postgres, db: str, table: str, key: str) -> dict:
    return {tuple(r[: key.count(",") + 1]): r for r in postgres.rows(f"SELECT * FROM {table} ORDER BY {key}", database=db)}


def _lake_rows(path: str, columns: list[str], key_len: int) -> dict | None:
    try:
        rows = Table.open(path).read(columns=columns).to_pylist()
    except Exception:
        return None
    out = {}
    for r in rows:
        values = tuple(None if r[c] is None else str(r[c]) for c in columns)
        out[values[:key_len]] = values
    return out


def _until(check, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"not reached in {timeout_s:.0f}s: {check.__doc__}")


def test_one_pipeline_takes_a_whole_database(kafka, kafka_connect, postgres, spark, tmp_path):
    tag = uuid.uuid4().hex[:6]
    db, prefix = f"whole_{tag}", f"db{tag}"
    capture(postgres, kafka_connect, db=db, prefix=prefix, tables="public.*", publication="all_tables",
            setup="CREATE TABLE customers (region text, cid int, name text, PRIMARY KEY (region, cid));"
                  "INSERT INTO customers VALUES ('eu', 1, 'ann'), ('us', 1, 'bob'), ('eu', 2, 'cy');"
                  "CREATE TABLE orders (id int PRIMARY KEY, cid int, total int);"
                  "INSERT INTO orders SELECT g, g % 3, g * 10 FROM generate_series(1, 30) g;"
                  "CREATE TABLE audit (at int, what text);"  # no primary key
                  "INSERT INTO audit VALUES (1, 'created')")
    (config,), problems = parse_pipelines(YAML.format(bootstrap=kafka.bootstrap_servers, prefix=prefix,
                                                      lake=tmp_path))
    assert not problems, problems

    # the snapshot's topics exist before the run starts: its first discovery finds them
    _until(lambda: len(DatabaseTables([config]).discover()[0]) == 2)
    stop = threading.Event()
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            run_pipelines([], once=False, stop=stop, spark=spark, discover=DatabaseTables([config]),
                          timeout_s=300)
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - judged by the test below
            outcome.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        def customers_match() -> bool:
            """customers in the lake as in Postgres"""
            want = {k: tuple(v) for k, v in _db_rows(postgres, db, "customers", "region, cid").items()}
            return _lake_rows(str(tmp_path / "customers"), ["region", "cid", "name"], 2) == {
                (r, str(c)): (r, str(c), n) for (r, c), (_, _, n) in
                [((k[0], int(k[1])), v) for k, v in want.items()]}

        def orders_match() -> bool:
            """orders in the lake as in Postgres"""
            want = {(i,): (i, c, t) for i, c, t in postgres.rows("SELECT * FROM orders", database=db)}
            return _lake_rows(str(tmp_path / "orders"), ["id", "cid", "total"], 1) == want

        _until(customers_match)
        _until(orders_match)
        postgres.sql("UPDATE customers SET name = 'ann b' WHERE region = 'eu' AND cid = 1;"
                     "DELETE FROM orders WHERE id > 25; UPDATE orders SET total = 0 WHERE id = 1", database=db)
        # a table created mid-run: its topic appears with its first change, and is picked up
        postgres.sql("CREATE TABLE returns (rid int PRIMARY KEY, oid int);"
                     "INSERT INTO returns VALUES (1, 3), (2, 4)", database=db)
        _until(customers_match)
        _until(orders_match)

        def returns_match() -> bool:
            """returns (created mid-run) in the lake as in Postgres"""
            want = {(r,): (r, o) for r, o in postgres.rows("SELECT * FROM returns", database=db)}
            return _lake_rows(str(tmp_path / "returns"), ["rid", "oid"], 1) == want

        _until(returns_match)

        # an unsafe change in one table stops that table alone: the others stay fresh
        postgres.sql("ALTER TABLE orders ALTER COLUMN total TYPE text; UPDATE orders SET total = 'many' WHERE id = 2",
                     database=db)
        postgres.sql("UPDATE customers SET name = 'cy 2' WHERE region = 'eu' AND cid = 2;"
                     "INSERT INTO returns VALUES (3, 5)", database=db)
        _until(customers_match)
        _until(returns_match)
    finally:
        stop.set()
        thread.join(120)
    assert not thread.is_alive()
    (error,) = outcome
    # the keyless table is refused by name, the changed one stopped naming the column and both
    # types; every other table ran on
    assert isinstance(error, PipelinesFailedError), error
    assert sorted(error.failures) == ["shop-audit", "shop-orders"]
    assert error.total == 4, "the run's tables: customers, orders, audit (refused), returns (found mid-run)"
    assert "no primary key" in str(error) and "tables.audit.record_key" in str(error)
    orders = str(tmp_path / "orders")  # the refusal names the table, the column and both types
    assert f"pipeline shop-orders failed: {orders}: field 'total': type change from int64 to string" in str(error)
    total = {r["id"]: r["total"] for r in Table.open(orders).read().to_pylist()}
    assert total[2] == 20, "the refused change was written"

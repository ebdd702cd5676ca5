"""docs/cdc-postgres.md, "Postgres to a Hudi lake", run from its own blocks: the server
settings it names, the worker's converters, the connector configuration and the
whole-database pipeline, with only the addresses, names and folders swapped for the
test's own. A database of two tables, then changes and a table created after the first
run, must end in the lake as ``SELECT *`` has it (read by hudi-rs, judged by Postgres)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import pytest

from tests.support.cdc import wait_for_events
from tests.support.doc_examples import fenced_blocks, run_streamer, streamer_args
from tests.support.trip_model import read_hudi_rs

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

DOC = Path(__file__).resolve().parents[3] / "docs" / "cdc-postgres.md"
SETUP = """
CREATE TABLE customers (id int PRIMARY KEY, name text, since timestamp);
CREATE TABLE orders (id bigint PRIMARY KEY, customer_id int, amount numeric(12, 2), placed date, note text);
INSERT INTO customers SELECT g, 'customer ' || g, timestamp '2024-01-01 00:00:00' + g * interval '1 hour'
  FROM generate_series(1, 20) g;
INSERT INTO orders SELECT g, g % 20 + 1, g * 1.25, date '2024-02-01' + g, NULL FROM generate_series(1, 60) g;
"""
CHANGES = """
UPDATE orders SET amount = amount + 0.01, note = 'paid' WHERE id % 7 = 0;
DELETE FROM orders WHERE id BETWEEN 50 AND 54;
UPDATE orders SET id = 1000 WHERE id = 1;
BEGIN; UPDATE customers SET name = 'renamed' WHERE id = 3; INSERT INTO orders VALUES (61, 3, 9.99, '2024-06-30', 'new');
COMMIT;
CREATE TABLE refunds (id int PRIMARY KEY, order_id bigint, amount numeric(12, 2));
INSERT INTO refunds VALUES (1, 7, 8.76), (2, 14, 17.51);
"""
#: Each table's topic and how many messages its changes make (tombstones after deletes).
TOPICS = {"customers": (20, 20 + 1), "orders": (60, 60 + 8 + 5 * 2 + 3 + 1), "refunds": (0, 2)}


def block(blocks: list[tuple[str, str]], marker: str) -> str:
    found = [body for _, body in blocks if marker in body]
    assert len(found) == 1, f"{DOC.name}: {len(found)} blocks hold {marker!r}"
    return found[0]


def settings(body: str, sep: str) -> dict[str, str]:
    """``key = value`` (postgresql.conf) or ``key=value`` (properties) lines."""
    out = {}
    for line in body.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition(sep)
            out[key.strip()] = value.strip()
    return out


def as_text(v: object) -> str | None:
    """A lake value as Postgres prints it."""
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return None if v is None else str(v)


def test_the_recipe_as_written_takes_a_database_into_the_lake(kafka, kafka_connect, postgres, spark, tmp_path):
    blocks = fenced_blocks(DOC)
    # 1. the server runs with at least the settings the recipe names
    conf = settings(block(blocks, "# postgresql.conf"), "=")
    assert postgres.sql("SHOW wal_level") == conf["wal_level"]
    for name in ("max_wal_senders", "max_replication_slots"):
        assert int(postgres.sql(f"SHOW {name}")) >= int(conf[name]), name

    # 2. the connector as configured there, on the suite's worker with the recipe's converters
    worker = settings(block(blocks, "# worker.properties"), "=")
    converters = {k: v for k, v in worker.items() if ".converter" in k}
    assert converters["value.converter.schemas.enable"] == "true"
    tag = uuid.uuid4().hex[:6]
    db, prefix = f"shop_{tag}", f"shop{tag}"
    postgres.sql(f"CREATE DATABASE {db}")
    postgres.sql(SETUP, database=db)
    connector = json.loads(block(blocks, '"connector.class": "io.debezium.connector.postgresql.PostgresConnector"'))
    connector.update({"database.port": str(postgres.port), "database.user": "postgres", "database.password": "unused",
                      "database.dbname": db, "topic.prefix": prefix, "slot.name": f"slot_{db}", **converters})
    kafka_connect.create(prefix, connector)
    kafka_connect.wait_running(prefix)

    # 3. the whole-database pipeline and its commands (once: the recipe's run is continuous)
    pipeline = block(blocks, "topic_pattern").replace("127.0.0.1:9092", kafka.bootstrap_servers)
    pipeline = pipeline.replace("'shop\\.public", f"'{prefix}\\.public").replace("lake/shop", str(tmp_path / "lake"))
    (tmp_path / "shop.yaml").write_text(pipeline)
    commands = [streamer_args(line) for line in block(blocks, "streamer validate shop.yaml").splitlines()]
    assert [c[0] for c in commands if c] == ["validate", "run"]

    def run_commands() -> None:
        for args in commands:
            assert args is not None
            rc, out, err = run_streamer([*args, "--once"] if args[0] == "run" else args, tmp_path)
            assert rc == 0, f"streamer {' '.join(args)} -> {rc}\n{out[-3000:]}\n{err[-3000:]}"

    for table, (first, _) in TOPICS.items():
        if first:
            wait_for_events(kafka, f"{prefix}.public.{table}", first)
    run_commands()
    postgres.sql(CHANGES, database=db)
    for table, (_, total) in TOPICS.items():
        wait_for_events(kafka, f"{prefix}.public.{table}", total)
    run_commands()

    for table in TOPICS:
        columns = [r[0] for r in postgres.rows(
            f"SELECT column_name FROM information_schema.columns WHERE table_name = '{table}' ORDER BY ordinal_position",
            database=db)]
        want = sorted(postgres.rows(f"SELECT * FROM {table}", database=db))
        lake = read_hudi_rs(str(tmp_path / "lake" / table)).select(columns).to_pylist()
        got = sorted(tuple(as_text(r[c]) for c in columns) for r in lake)
        assert got == want, table
    kafka_connect.delete(prefix)

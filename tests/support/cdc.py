"""Debezium change events for the tests, and a model of the table they must end as.

:func:`pg_event` builds an event as Debezium's Postgres connector publishes it (JSON
converter without schemas); :class:`RowModel` applies events in log order, independently
of the pipeline, including Debezium's placeholder for an unchanged TOASTed value.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

PLACEHOLDER = "__debezium_unavailable_value"


def pg_event(op: str, before: dict | None, after: dict | None, lsn: int, *, tx: int = 7,
             ts_ms: int = 1_700_000_000_000) -> dict[str, Any]:
    """One change event of table ``public.orders`` on server ``pg``."""
    source = {"version": "3.6.1.Final", "connector": "postgresql", "name": "pg", "ts_ms": ts_ms,
              "db": "shop", "schema": "public", "table": "orders", "txId": tx, "lsn": lsn, "xmin": None}
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": ts_ms + 123}


@dataclass
class RowModel:
    """The rows a sequence of change events leaves, keyed by ``key``: each key's events in
    LSN order, a placeholder taking the value the key last had. A create at the position of
    a delete is a primary-key change (Debezium sends it as the two): its placeholders take
    the deleted key's values."""

    key: str = "id"
    rows: dict[Any, dict[str, Any]] = field(default_factory=dict)

    def apply(self, events: list[dict[str, Any] | None]) -> None:
        deleted: dict[int, dict[str, Any]] = {}  # the row each delete removed, by its position
        for e in sorted((e for e in events if e is not None), key=lambda e: (e["source"]["lsn"], e["op"] != "d")):
            row = e["after"] if e["op"] != "d" else e["before"]
            k = row[self.key]
            if e["op"] == "d":
                deleted[e["source"]["lsn"]] = self.rows.pop(k, {})
                continue
            old = self.rows.get(k) or (deleted.get(e["source"]["lsn"], {}) if e["op"] == "c" else {})
            new = {c: (old.get(c) if v == PLACEHOLDER else v) for c, v in e["after"].items()}
            new.update(_event_lsn=e["source"]["lsn"], _change_operation_type=e["op"])
            self.rows[k] = new

    def snapshot(self) -> list[dict[str, Any]]:
        return [dict(r) for _, r in sorted(self.rows.items())]


def capture(postgres: Any, connect: Any, *, db: str, prefix: str, setup: str, tables: str = "public.orders",
            publication: str = "filtered", settings: dict[str, str] | None = None) -> dict[str, str]:
    """A new database ``db`` made by ``setup`` (SQL), captured by a Debezium connector named
    ``prefix`` (its topics ``<prefix>.<schema>.<table>``) with ``settings`` over the usual
    ones, running; its configuration."""
    from tests.support.connect import postgres_connector

    postgres.sql(f"CREATE DATABASE {db}")
    postgres.sql(setup, database=db)
    config = postgres_connector(port=postgres.port, database=db, prefix=prefix, tables=tables,
                                slot=f"slot_{db}", publication=publication) | (settings or {})
    connect.create(prefix, config)
    connect.wait_running(prefix)
    return config


def captured_pipeline(postgres: Any, connect: Any, kafka: Any, yaml: str, lake: Any, *, setup: str) -> tuple[Any, str, str]:
    """A new database made by ``setup``, its ``public.orders`` captured, and the one pipeline
    of ``yaml`` (formatted with ``bootstrap``, ``topic`` and ``t``: ``lake``/orders) that
    reads it: the pipeline's config, the database and the topic."""
    import uuid

    from streamer.config import parse_pipelines

    tag = uuid.uuid4().hex[:6]
    db, prefix = f"db_{tag}", f"cdc{tag}"
    topic = f"{prefix}.public.orders"
    capture(postgres, connect, db=db, prefix=prefix, setup=setup)
    (config,), problems = parse_pipelines(yaml.format(bootstrap=kafka.bootstrap_servers, topic=topic,
                                                      t=lake / "orders"))
    assert not problems, problems
    return config, db, topic


def wait_for_events(kafka, topic: str, count: int, timeout_s: float = 60.0) -> None:
    """Until Debezium has published ``count`` messages to ``topic`` (bounded in time)."""
    deadline = time.monotonic() + timeout_s
    seen = 0
    while time.monotonic() < deadline:
        try:
            seen = sum(kafka.end_offsets(topic).values())
        except Exception:  # the topic is created with the first event
            seen = 0
        if seen >= count:
            assert seen == count, f"{seen} messages in {topic}, expected {count}"
            return
        time.sleep(0.3)
    raise AssertionError(f"only {seen} of {count} messages reached {topic} in {timeout_s:.0f}s")


def wait_published(kafka, topic: str, *, settled_s: float = 1.5, timeout_s: float = 60.0) -> None:
    """Wait until Debezium has published every change so far to ``topic``: its end has not
    moved for ``settled_s`` (bounded by ``timeout_s``). Kafka Connect killed after that
    cannot die between the records of one of those changes (debezium/dbz#2549: the rest of
    a change's records, a key change's create after its delete, are then lost for good)."""
    deadline = time.monotonic() + timeout_s
    last, since = kafka.end_offsets(topic), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = kafka.end_offsets(topic)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= settled_s:
            return
    raise AssertionError(f"{topic} kept growing for {timeout_s:.0f}s after the workload paused")


def lake_orders(path: str) -> dict[int, tuple]:
    """The ``orders`` table at ``path`` as ``{id: (name, qty, note)}``; no key twice."""
    from streamer.read import Table

    rows = Table.open(path).read().to_pylist()
    out = {r["id"]: (r["name"], r["qty"], r["note"]) for r in rows}
    assert len(out) == len(rows), "a key is in the table twice"
    return out


def postgres_orders(postgres: Any, db: str) -> dict[int, tuple]:
    """``SELECT id, name, qty, note FROM orders`` in ``db``, as :func:`lake_orders` has it."""
    rows = postgres.rows("SELECT id, name, qty, note FROM orders", database=db)
    return {int(i): (n, None if q is None else int(q), note) for i, n, q, note in rows}


#: Debezium's Postgres ``source`` block schema, as its JsonConverter output carries it.
_PG_SOURCE_SCHEMA = {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.Source",
                     "field": "source", "fields": [
                         {"type": "string", "optional": False, "field": "version"},
                         {"type": "string", "optional": False, "field": "connector"},
                         {"type": "string", "optional": False, "field": "name"},
                         {"type": "int64", "optional": False, "field": "ts_ms"},
                         {"type": "string", "optional": False, "field": "db"},
                         {"type": "string", "optional": False, "field": "schema"},
                         {"type": "string", "optional": False, "field": "table"},
                         {"type": "int64", "optional": True, "field": "txId"},
                         {"type": "int64", "optional": True, "field": "lsn"},
                         {"type": "int64", "optional": True, "field": "xmin"}]}


def connect_envelope(event: dict[str, Any], columns: list[dict[str, Any]]) -> dict[str, Any]:
    """``event`` as Kafka Connect's JsonConverter writes it with ``schemas.enable``: its
    Connect schema (the row's ``columns``, Connect field schemas, in ``before`` and
    ``after``) beside it as ``payload``."""
    row = {"type": "struct", "optional": True, "name": "pg.public.orders.Value", "fields": columns}
    schema = {"type": "struct", "optional": False, "name": "pg.public.orders.Envelope", "version": 2, "fields": [
        {**row, "field": "before"}, {**row, "field": "after"}, _PG_SOURCE_SCHEMA,
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"}]}
    return {"schema": schema, "payload": event}

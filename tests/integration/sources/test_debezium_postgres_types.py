"""Postgres's column types through Debezium, as JSON with embedded schemas and as Avro
through the schema registry (Apicurio's converter), with Debezium's defaults (``decimal.handling.mode: precise``, ``time.precision.mode: adaptive``): each
column arrives with the database's type and value - ``int`` and ``smallint`` apart from
``bigint``, ``numeric(12,2)`` as a decimal, dates and timestamps as such, ``bytea`` as
bytes - judged against Postgres itself, in hudi-rs and in our reader."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from decimal import Decimal

import pyarrow as pa
import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from tests.support.cdc import wait_for_events
from tests.support.connect import postgres_connector
from tests.support.trip_model import read_hudi_rs, read_ours

pytestmark = [pytest.mark.integration, pytest.mark.kafka]


TABLE = """
CREATE TABLE kinds (
  id int PRIMARY KEY, small smallint, big bigint, ratio real, score double precision,
  amount numeric(12, 2), wide numeric(38, 4), loose numeric, born date, seen timestamp, seen_ms timestamp(3),
  at timestamptz, opens time, flag boolean, blob bytea, uid uuid, doc jsonb, tags text[], days date[]);
INSERT INTO kinds VALUES
  (1, -7, 1099511627777, 0.5, -2.25, -1234.50, -1234567890123456789012345678901234.5678, -0.042,
   '1969-07-20', '1969-12-31 23:59:59.999999', '2023-11-14 22:13:20.123', '2024-03-01 12:00:00.25+02',
   '10:00:00.5', true, '\\x00ff64', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": 1}', '{x,"y z"}',
   '{1969-07-20,1970-01-01}'),
  (2, 32767, -1, -1e-3, 1e300, 9999999999.99, 0, 12345678901234567890.5, '2038-01-19', '2038-01-19 03:14:08',
   '1900-01-01 00:00:00', '1901-12-13 20:45:52Z', '23:59:59.999999', false, '', NULL, '[]', '{}', '{}'),
  (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
"""
#: Postgres's own rendering of each column, for the comparison (text, never a reader's).
COLUMNS = {
    "id": "id", "small": "small", "big": "big", "ratio": "ratio::float8::text", "score": "score::text",
    "amount": "amount::text", "wide": "wide::text", "loose": "loose::text", "born": "born::text",
    "seen": "to_char(seen, 'YYYY-MM-DD\"T\"HH24:MI:SS.US')", "seen_ms": "to_char(seen_ms, 'YYYY-MM-DD\"T\"HH24:MI:SS.US')",
    "at": "to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US')",
    "opens": "(extract(epoch FROM opens) * 1000000)::bigint", "flag": "flag::text", "blob": "encode(blob, 'hex')",
    "uid": "uid::text", "doc": "doc::text", "tags": "array_to_json(tags)::text", "days": "array_to_json(days)::text",
}
#: What each column must be in the table (Avro's types as Hudi stores them: no 16-bit ints).
TYPES = {
    "id": pa.int32(), "small": pa.int32(), "big": pa.int64(), "ratio": pa.float32(), "score": pa.float64(),
    "amount": pa.decimal128(12, 2), "wide": pa.decimal128(38, 4), "loose": pa.string(), "born": pa.date32(),
    "opens": pa.int64(), "flag": pa.bool_(), "blob": pa.binary(), "uid": pa.string(), "doc": pa.string(),
    "tags": pa.list_(pa.string()), "days": pa.list_(pa.date32()),
}


def as_postgres_text(column: str, v: object) -> str | None:
    """A lake value in the rendering :data:`COLUMNS` asks of Postgres."""
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return v.strftime("%Y-%m-%dT%H:%M:%S.%f")
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, bytes):
        return v.hex()
    if column == "ratio":
        return repr(float(v))  # float4 widened: Postgres's float8 text of the same value
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, list):
        return json.dumps([x.isoformat() if isinstance(x, dt.date) else x for x in v], separators=(",", ":"))
    return str(v)


def postgres_rows(postgres, db: str) -> dict[int, dict]:
    select = ", ".join(f"{expr} AS {name}" for name, expr in COLUMNS.items())
    rows = postgres.rows(f"SELECT {select} FROM kinds", database=db)
    out = {}
    for r in rows:
        row = dict(zip(COLUMNS, r, strict=True))
        if row["score"] is not None:
            row["score"] = repr(float(row["score"]))
        if row["ratio"] is not None:
            row["ratio"] = repr(float(row["ratio"]))
        for name in ("tags", "days"):  # Postgres's JSON spacing is its own
            if row[name] is not None:
                row[name] = json.dumps(json.loads(row[name]), separators=(",", ":"))
        out[int(row["id"])] = row
    return out


def lake_rows(table: pa.Table) -> dict[int, dict]:
    rows = table.select(list(COLUMNS)).to_pylist()
    out = {r["id"]: {c: as_postgres_text(c, v) for c, v in r.items()} for r in rows}
    assert len(out) == len(rows), "a key is in the table twice"
    return out


def converters(registry_url: str | None) -> dict[str, str]:
    """The connector's converters: JSON embedding each record's schema, or Apicurio's Avro."""
    if registry_url is not None:
        from tests.integration.sources.test_debezium_postgres_avro import apicurio_avro

        return apicurio_avro(registry_url)
    return {f"{side}.{k}": v for side in ("key", "value") for k, v in (
        ("converter", "org.apache.kafka.connect.json.JsonConverter"), ("converter.schemas.enable", "true"))}


@pytest.mark.parametrize("converter", ["json", "avro"])
def test_postgres_types_arrive_as_the_database_has_them(kafka, kafka_connect, postgres, spark, tmp_path, request,
                                                        converter):
    registry = request.getfixturevalue("schema_registry").url if converter == "avro" else None
    tag = uuid.uuid4().hex[:6]
    db, prefix = f"kinds_{tag}", f"typ{tag}"
    topic = f"{prefix}.public.kinds"
    postgres.sql(f"CREATE DATABASE {db}")
    postgres.sql(TABLE, database=db)
    connector = postgres_connector(port=postgres.port, database=db, prefix=prefix, tables="public.kinds",
                                   slot=f"slot_{db}")
    # Debezium's defaults for decimals and times
    connector.pop("decimal.handling.mode")
    connector.pop("time.precision.mode")
    connector.update(converters(registry))
    kafka_connect.create(prefix, connector)
    kafka_connect.wait_running(prefix)
    source = {"type": "kafka", "bootstrap_servers": kafka.bootstrap_servers, "topic": topic, "debezium": "postgres"}
    if registry:
        source.update(format="avro", schema_registry={"url": registry})
    pipeline = {"name": "kinds", "source": source, "target": {"path": str(tmp_path / "kinds"), "record_key": ["id"]},
                "trigger": {"mode": "once"}, "engine": "local"}
    (config,), problems = parse_pipelines(json.dumps({"pipelines": [pipeline]}))  # YAML takes JSON
    assert not problems
    wait_for_events(kafka, topic, 3)
    report = PipelineRunner(config, spark=spark).run_once()
    assert (report.read, report.errored) == (3, 0)

    postgres.sql("UPDATE kinds SET amount = amount * 2, born = born + 1, at = at + interval '1 second' WHERE id = 1;"
                 "UPDATE kinds SET small = 1, amount = 0.01, days = '{2000-02-29}' WHERE id = 3;"
                 "DELETE FROM kinds WHERE id = 2;"
                 "INSERT INTO kinds (id, amount, born, seen) VALUES (4, -0.01, '0001-01-01', '1970-01-01 00:00:00')",
                 database=db)
    wait_for_events(kafka, topic, 3 + 2 + 2 + 1)  # the delete's tombstone too
    report = PipelineRunner(config, spark=spark).run_once()
    assert report.errored == 0

    expected = postgres_rows(postgres, db)
    assert sorted(expected) == [1, 3, 4]
    assert expected[1]["amount"] == "-2469.00" and expected[4]["born"] == "0001-01-01"
    for reader in (read_hudi_rs, read_ours):
        table = reader(str(config.target.path))
        assert lake_rows(table) == expected, reader.__name__
        types = {f.name: f.type for f in table.schema}
        assert {c: types[c] for c in TYPES} == TYPES, reader.__name__
        for name in ("seen", "seen_ms", "at"):
            assert pa.types.is_timestamp(types[name]), (reader.__name__, name, types[name])
    assert read_ours(str(config.target.path)).column("wide").to_pylist()[0] == Decimal(
        "-1234567890123456789012345678901234.5678")

"""Postgres → Debezium with Apicurio's Avro converter (keys and values through the schema
registry, Confluent framing) → the real broker → our pipeline: the table equals
``SELECT * FROM t`` as it does with the JSON converter (test_debezium_postgres.py), over a
snapshot, updates, deletes, a key change, a transaction and an unchanged TOASTed value.

The connector overrides the worker's JSON converters with its own, as a user does per
connector; the converter is installed as a Connect plugin (``jvm/connect-apicurio``).
"""

from __future__ import annotations

import uuid

import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table
from tests.support.cdc import lake_orders, postgres_orders, wait_for_events
from tests.support.connect import postgres_connector

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

YAML = """
pipelines:
  - name: orders
    source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic: {topic}, debezium: postgres,
             format: avro, schema_registry: {{url: "{registry}"}}}}
    target: {{path: "{t}", record_key: [id]}}
    trigger: {{mode: once}}
    engine: local
"""


def apicurio_avro(registry_url: str) -> dict[str, str]:
    """Converter settings of a connector writing Avro through Apicurio Registry 2.x in
    Confluent's framing (magic byte, 4-byte id), which any Confluent-compatible consumer reads."""
    api = registry_url.split("/apis/", 1)[0] + "/apis/registry/v2"
    out = {}
    for side in ("key", "value"):
        out.update({
            f"{side}.converter": "io.apicurio.registry.utils.converter.AvroConverter",
            f"{side}.converter.apicurio.registry.url": api,
            f"{side}.converter.apicurio.registry.auto-register": "true",
            f"{side}.converter.apicurio.registry.find-latest": "true",
            f"{side}.converter.apicurio.registry.as-confluent": "true",
            # the id in the message is the content id, which the Confluent-compatible API
            # resolves (the converter's default, the version's global id, is another number
            # as soon as a version's content repeats, e.g. after a connector restart)
            f"{side}.converter.apicurio.registry.use-id": "contentId",
            f"{side}.converter.apicurio.registry.headers.enabled": "false",
        })
    out["schema.name.adjustment.mode"] = "avro"
    return out


def test_avro_change_events_from_a_real_connector(kafka, kafka_connect, postgres, spark, schema_registry, tmp_path):
    tag = uuid.uuid4().hex[:6]
    db, prefix = f"avro_{tag}", f"av{tag}"
    topic = f"{prefix}.public.orders"
    postgres.sql(f"CREATE DATABASE {db}")
    postgres.sql("CREATE TABLE orders (id int PRIMARY KEY, name text, qty int, note text);"
                 "ALTER TABLE orders ALTER COLUMN note SET STORAGE EXTERNAL;"
                 "INSERT INTO orders SELECT g, 'item ' || g, g, CASE WHEN g <= 3 THEN repeat(g::text, 3000) END "
                 "FROM generate_series(1, 30) g", database=db)
    config = postgres_connector(port=postgres.port, database=db, prefix=prefix, tables="public.orders",
                                slot=f"slot_{db}")
    kafka_connect.create(prefix, {**config, **apicurio_avro(schema_registry.url)})
    kafka_connect.wait_running(prefix)
    (pipeline,), problems = parse_pipelines(YAML.format(bootstrap=kafka.bootstrap_servers, topic=topic,
                                                        registry=schema_registry.url, t=tmp_path / "orders"))
    assert not problems
    wait_for_events(kafka, topic, 30)
    report = PipelineRunner(pipeline, spark=spark).run_once()
    assert (report.read, report.errored, report.filtered) == (30, 0, 0)
    assert lake_orders(pipeline.target.path) == postgres_orders(postgres, db)

    postgres.sql("UPDATE orders SET qty = qty * 10 WHERE id <= 5", database=db)  # 1-3 keep their TOASTed note
    postgres.sql("DELETE FROM orders WHERE id BETWEEN 21 AND 22", database=db)
    postgres.sql("UPDATE orders SET id = 100 WHERE id = 30", database=db)
    postgres.sql("BEGIN; UPDATE orders SET name = 'v1' WHERE id = 10; UPDATE orders SET name = 'v2', qty = 0 "
                 "WHERE id = 10; INSERT INTO orders VALUES (101, 'new', 1, NULL); COMMIT", database=db)
    streamed = 5 + 2 * 2 + 3 + 3
    wait_for_events(kafka, topic, 30 + streamed)
    report = PipelineRunner(pipeline, spark=spark).run_once()
    assert (report.read, report.errored, report.filtered) == (streamed, 0, 2 + 1)
    table = lake_orders(pipeline.target.path)
    assert table == postgres_orders(postgres, db)
    assert table[2][2] == "2" * 3000  # an unchanged TOASTed value, kept from the table
    columns = set(Table.open(pipeline.target.path).read().column_names)
    assert not columns & {"transaction", "ts_us", "ts_ns", "before", "after"}, "envelope fields are not columns"

"""Kafka Avro pipelines end to end: Confluent-framed records land in a Hudi table.

Two schema versions go through a real registry (Apicurio, Confluent-compatible API):
v1 records first, then v2 records (a field added) that also update some v1 keys. The
table evolves (the new column is added, nullable); rows written before it read null
there, as in Hudi. A pipeline with a fixed ``.avsc`` (no registry) works too.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pyarrow as pa
import pytest

from streamer.config import parse_pipelines
from streamer.pipeline.runner import PipelineRunner
from streamer.read import Table

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

V1: dict[str, Any] = {
    "type": "record",
    "name": "Trip",
    "namespace": "io.morstreamer.test",
    "fields": [
        {"name": "uuid", "type": "string"},
        {"name": "ts", "type": "long"},
        {"name": "fare", "type": "double"},
    ],
}
V2: dict[str, Any] = {**V1, "fields": [*V1["fields"], {"name": "currency", "type": ["null", "string"], "default": None}]}


def _pipeline(tmp_path, source_yaml: str, name: str):
    text = f"""
pipelines:
  - name: {name}
    source: {source_yaml}
    target: {{path: "{tmp_path}/lake/{name}", record_key: uuid, ordering_field: ts}}
    policies: {{log_compaction: {{mode: "off"}}, compaction: {{mode: "off"}}, clean: {{mode: "off"}}, archive: {{mode: "off"}}}}
    trigger: {{mode: once}}
    engine: local
"""
    configs, problems = parse_pipelines(text, base_dir=tmp_path)
    assert not problems, problems
    return configs[0]


def _snapshot(path: str) -> dict[str, dict]:
    t = Table.open(path).read()
    cols = [c for c in t.column_names if not c.startswith("_hoodie_")]
    return {r["uuid"]: r for r in t.select(cols).to_pylist()}


def _hudi_rs_rows(path: str) -> dict[str, dict]:
    import hudi

    batches = hudi.HudiTableBuilder.from_base_uri(path).build().read()
    t = pa.Table.from_batches(batches) if not isinstance(batches, pa.Table) else batches
    cols = [c for c in t.column_names if not c.startswith("_hoodie_")]
    return {r["uuid"]: r for r in t.select(cols).to_pylist()}


def test_two_schema_versions_land_in_the_table(kafka, schema_registry, spark, tmp_path):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = kafka.create_topic(f"avro-pipe-{uuid.uuid4().hex[:8]}", partitions=2)
    client = SchemaRegistryClient({"url": schema_registry.url, "timeout": 10})
    client.set_compatibility(f"{topic}-value", "BACKWARD")
    ctx = SerializationContext(topic, MessageField.VALUE)
    ser_v1 = AvroSerializer(client, json.dumps(V1), conf={"auto.register.schemas": True})
    ser_v2 = AvroSerializer(client, json.dumps(V2), conf={"auto.register.schemas": True})

    v1_records = [{"uuid": f"t{i:03d}", "ts": 1000 + i, "fare": float(i)} for i in range(40)]
    kafka.produce(topic, [ser_v1(r, ctx) for r in v1_records], keys=[r["uuid"] for r in v1_records])

    cfg = _pipeline(
        tmp_path,
        f'{{type: kafka, bootstrap_servers: "{kafka.bootstrap_servers}", topic: {topic}, format: avro, '
        f'schema_registry: {{url: "{schema_registry.url}"}}}}',
        "avro_trips",
    )
    runner = PipelineRunner(cfg, spark=spark)
    first = runner.run_once()
    assert (first.read, first.written, first.errored) == (40, 40, 0)
    model = {r["uuid"]: {**r} for r in v1_records}
    assert {k: {c: v[c] for c in ("uuid", "ts", "fare")} for k, v in _snapshot(cfg.target.path).items()} == model

    # v2: new keys and updates of the first ten v1 keys, with the added field.
    v2_records = [{"uuid": f"t{i:03d}", "ts": 5000 + i, "fare": i * 2.5, "currency": "USD"} for i in range(30, 50)]
    v2_records += [{"uuid": f"t{i:03d}", "ts": 6000 + i, "fare": -1.0, "currency": None} for i in range(10)]
    kafka.produce(topic, [ser_v2(r, ctx) for r in v2_records], keys=[r["uuid"] for r in v2_records])
    second = PipelineRunner(cfg, spark=spark).run_once()  # a new process would resume the same way
    assert (second.read, second.written, second.errored) == (len(v2_records), len(v2_records), 0)

    for r in model.values():
        r["currency"] = None  # written before the column existed: null, as Hudi reads it
    for r in v2_records:
        model[r["uuid"]] = dict(r)
    ours = _snapshot(cfg.target.path)
    assert ours == model
    assert _hudi_rs_rows(cfg.target.path) == model
    schema = Table.open(cfg.target.path).read().schema
    assert schema.field("currency").nullable


def test_fixed_avsc_pipeline_without_registry(kafka, spark, tmp_path):
    import io

    import fastavro

    topic = kafka.create_topic(f"avro-file-{uuid.uuid4().hex[:8]}", partitions=1)
    (tmp_path / "trip.avsc").write_text(json.dumps(V1))
    parsed = fastavro.parse_schema(V1)
    records = [{"uuid": f"f{i}", "ts": i, "fare": i / 4} for i in range(25)]

    def raw(rec: dict) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        return buf.getvalue()

    kafka.produce(topic, [raw(r) for r in records] + [b"\xff\xff"])
    cfg = _pipeline(
        tmp_path,
        f'{{type: kafka, bootstrap_servers: "{kafka.bootstrap_servers}", topic: {topic}, format: avro, '
        "avro_schema_file: trip.avsc, avro_wire_format: raw}",
        "avro_file_trips",
    )
    report = PipelineRunner(cfg, spark=spark).run_once()
    assert (report.read, report.written, report.errored) == (26, 25, 1)
    assert _snapshot(cfg.target.path) == {r["uuid"]: r for r in records}
    errors = Table.open(cfg.errors.path).read()
    assert errors.num_rows == 1 and errors.column("reason")[0].as_py()

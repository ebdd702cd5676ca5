"""Secrets never show up in repr/str, JSON dumps, summaries, problems or logs."""

from __future__ import annotations

import logging
import textwrap
import typing

import pytest
from pydantic import BaseModel, SecretStr

import streamer.config as config_pkg
from streamer.config import parse_pipelines
from streamer.sources.kafka.settings import librdkafka_config, spark_kafka_options

SECRET = "s3cr3t-hunter2"

TEXT = textwrap.dedent("""
pipelines:
  - name: trips
    source:
      type: kafka
      bootstrap_servers: b:9092
      topic: trips
      security: {protocol: SASL_SSL, sasl_mechanism: SCRAM-SHA-512, sasl_username: svc, sasl_password: "${PW}"}
      options: {kafka.ssl.truststore.password: "${PW}", kafka.client.id: c1}
    target: {path: lake/trips, record_key: uuid}
    spark: {conf: {spark.hadoop.fs.s3a.secret.key: "${PW}", spark.executor.memory: 2g, spark.sql.shuffle.partitions: 8}}
""")


@pytest.fixture()
def pipeline():
    (p,), problems = parse_pipelines(TEXT, env={"PW": SECRET})
    assert problems == []
    return p


def test_secrets_are_masked_everywhere(pipeline, caplog):
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("test").info("config %s %r", pipeline, pipeline)
    shown = [repr(pipeline), str(pipeline), pipeline.model_dump_json(), str(pipeline.model_dump()), pipeline.summary(), caplog.text]
    for text in shown:
        assert SECRET not in text
    assert "**********" in repr(pipeline.source.security)


def test_secret_values_are_usable_where_needed(pipeline):
    sec = pipeline.source.security
    assert sec.sasl_password.get_secret_value() == SECRET
    assert isinstance(pipeline.spark.conf["spark.hadoop.fs.s3a.secret.key"], SecretStr)
    assert pipeline.spark.conf["spark.sql.shuffle.partitions"] == "8"  # ints become strings
    opts = spark_kafka_options(pipeline.source)
    assert opts["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert "ScramLoginModule required" in opts["kafka.sasl.jaas.config"]
    assert SECRET in opts["kafka.sasl.jaas.config"] and opts["kafka.ssl.truststore.password"] == SECRET
    assert SECRET not in repr(opts) and SECRET not in str(opts)
    rd = librdkafka_config(pipeline.source)
    assert rd["sasl.password"] == SECRET and SECRET not in repr(rd)


def test_invalid_secret_input_is_not_echoed():
    bad = TEXT.replace("sasl_username: svc, ", "")
    _, problems = parse_pipelines(bad, env={"PW": SECRET})
    assert problems and all(SECRET not in str(p) for p in problems)


def _models() -> list[type[BaseModel]]:
    out = []
    for module in ("pipeline", "policies", "sources", "target", "transforms"):
        mod = getattr(config_pkg, module)
        out += [v for v in vars(mod).values() if isinstance(v, type) and issubclass(v, BaseModel)]
    return out


def test_every_password_or_secret_field_is_a_secretstr():
    checked = 0
    for model in _models():
        for name, field in model.model_fields.items():
            if "password" in name or "secret" in name:
                args = typing.get_args(field.annotation) or (field.annotation,)
                assert SecretStr in args, f"{model.__name__}.{name} must be SecretStr"
                checked += 1
    assert checked >= 5

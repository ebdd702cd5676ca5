"""A ``topic_pattern`` pipeline's per-table overrides reach the table they name."""

from __future__ import annotations

from streamer.config import parse_pipelines
from streamer.pipeline.database import child_config

YAML = r"""
pipelines:
  - name: shop
    source: {{type: kafka, bootstrap_servers: "127.0.0.1:9", topic_pattern: 'pg\.public\..*', debezium: postgres}}
    target: {{path: "/lake/{{table}}"}}
    tables:
      orders: {{partition_by: status, index: {{type: global_bloom}}}}
    engine: {engine}
"""


def test_a_table_override_sets_its_partitioning_and_index():
    (parent,), problems = parse_pipelines(YAML.format(engine="auto"))
    assert not problems
    orders = child_config(parent, "pg.public.orders", ["id"])
    assert orders.target.partition_by == ["status"] and orders.target.index.type == "global_bloom"
    assert orders.target.writer_index.is_global
    items = child_config(parent, "pg.public.items", ["id"])
    assert items.target.partition_by == [] and items.target.index.type == "bloom"


def test_a_global_index_with_the_spark_engine_is_refused_naming_the_table():
    _, problems = parse_pipelines(YAML.format(engine="spark"))
    assert len(problems) == 1 and "tables.orders.index global_bloom" in str(problems[0])

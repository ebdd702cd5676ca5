"""A ``topic_pattern`` pipeline's per-table overrides reach the table they name, and
``--pipeline`` picks its children by name."""

from __future__ import annotations

import pytest

from streamer.config import parse_pipelines
from streamer.errors import ConfigError
from streamer.pipeline.database import DatabaseTables, child_config, select

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


SELECT_YAML = r"""
pipelines:
  - name: shop
    source: {type: kafka, bootstrap_servers: "127.0.0.1:9", topic_pattern: 'pg\.public\..*', debezium: postgres}
    target: {path: "/lake/{table}"}
  - name: clicks
    source: {type: kafka, bootstrap_servers: "127.0.0.1:9", topic: clicks, format: json, schema: "id STRING"}
    target: {path: /lake/clicks, record_key: [id]}
"""


def _configs():
    configs, problems = parse_pipelines(SELECT_YAML)
    assert not problems
    return configs


def test_select_by_a_pipelines_own_name_takes_every_child():
    picked, only = select(_configs(), ["shop"], source="p.yaml")
    assert [c.name for c in picked] == ["shop"] and only is None


def test_select_a_child_by_name_keeps_its_parent_and_only_that_child():
    picked, only = select(_configs(), ["shop-orders", "clicks"], source="p.yaml")
    assert [c.name for c in picked] == ["shop", "clicks"]
    tables = DatabaseTables(picked, only=only)
    (shop,) = tables.parents
    assert tables._wanted(shop, "shop-orders") and not tables._wanted(shop, "shop-items")


def test_select_a_parent_and_one_of_its_children_takes_them_all():
    picked, only = select(_configs(), ["shop-orders", "shop"], source="p.yaml")
    (shop,) = DatabaseTables(picked, only=only).parents
    assert DatabaseTables(picked, only=only)._wanted(shop, "shop-items")


def test_select_an_unknown_name_is_refused_naming_what_there_is():
    with pytest.raises(ConfigError) as e:
        select(_configs(), ["clicks-x", "nope"], source="p.yaml")
    assert str(e.value) == "p.yaml: no pipeline named clicks-x, nope (have: clicks, shop, shop-<table>)"


def test_a_child_name_belongs_to_the_longest_parent_that_prefixes_it():
    eu = SELECT_YAML.replace("- name: clicks", "- name: shop-eu").replace("topic: clicks, format: json, schema: \"id STRING\"",
                                                                       r"topic_pattern: 'eu\..*', debezium: postgres")
    eu = eu.replace("path: /lake/clicks, record_key: [id]", 'path: "/lake/eu/{table}"')
    configs, problems = parse_pipelines(eu)
    assert not problems, problems
    picked, only = select(configs, ["shop-eu-orders"], source="p.yaml")
    assert [c.name for c in picked] == ["shop-eu"]
    tables = DatabaseTables(picked, only=only)
    assert tables._looked_for == {"shop-eu": {"shop-eu-orders"}}


def test_one_catalog_table_for_every_table_of_a_pattern_is_refused():
    yaml = SELECT_YAML.replace('target: {path: "/lake/{table}"}',
                               'target: {path: "/lake/{table}", catalog: {type: hive, uri: "thrift://127.0.0.1:9083", '
                               'table: orders}}')
    _, problems = parse_pipelines(yaml)
    assert len(problems) == 1 and "leave target.catalog.table unset" in str(problems[0])
    _, problems = parse_pipelines(yaml.replace(", table: orders", ""))
    assert not problems

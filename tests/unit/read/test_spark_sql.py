"""Spark SQL over a table: ``CREATE TABLE ... USING morhudi LOCATION`` with a path or a URI."""

from __future__ import annotations

import pytest

from streamer.read import Table
from tests.support import block_tables as tg

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def table_path(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("sql") / "trips")
    tg.build(path, 3)
    return path


@pytest.mark.parametrize("location", ["{p}", "file:{p}", "file://{p}"])
def test_create_table_using_morhudi_location_then_select(spark, table_path, location):
    expected = tg.canon(Table.open(table_path).scan().table)
    name = "trips_" + ("plain" if location == "{p}" else "uri" if location == "file:{p}" else "uri3")
    spark.sql(f"DROP TABLE IF EXISTS {name}")
    spark.sql(f"CREATE TABLE {name} USING morhudi LOCATION '{location.format(p=table_path)}'")
    try:
        got = spark.sql(f"SELECT id, city, ts, value FROM {name}").toArrow()
        assert tg.canon(got) == expected
        assert spark.sql(f"SELECT count(*) AS n FROM {name} WHERE city = 'sf'").first().n == sum(
            1 for r in expected if r["city"] == "sf")
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
    assert Table.open(table_path).scan().table.num_rows == len(expected)  # DROP leaves the data


def test_load_with_a_file_uri_and_a_temporary_view(spark, table_path):
    expected = tg.canon(Table.open(table_path).scan().table)
    df = spark.read.format("morhudi").load("file:" + table_path)
    assert tg.canon(df.select("id", "city", "ts", "value").toArrow()) == expected
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW trips_view USING morhudi OPTIONS (path 'file://{table_path}')")
    assert spark.sql("SELECT count(*) AS n FROM trips_view").first().n == len(expected)


def test_a_catalog_table_keeps_its_read_options(spark, table_path):
    ro = Table.open(table_path).scan(query="read_optimized").table.num_rows
    assert ro != Table.open(table_path).scan().table.num_rows  # the options must matter here
    spark.sql("DROP TABLE IF EXISTS trips_ro")
    spark.sql(f"CREATE TABLE trips_ro USING morhudi OPTIONS (query 'read_optimized') LOCATION 'file:{table_path}'")
    try:
        assert spark.sql("SELECT count(*) AS n FROM trips_ro").first().n == ro
    finally:
        spark.sql("DROP TABLE IF EXISTS trips_ro")

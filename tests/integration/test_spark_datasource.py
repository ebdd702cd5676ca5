"""``spark.read.format("morhudi")`` returns exactly the fixtures' expected rows."""

from __future__ import annotations

import pytest

from tests.support.fixture_tables import (
    FIXTURE_NAMES,
    QUERIES,
    canonical_lines,
    expected_lines,
    table_path,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def morhudi(spark):
    from streamer.read.spark_source import register

    register(spark)
    return spark


def _rows(df) -> list[dict]:
    return df.toArrow().to_pylist()


def test_every_fixture_through_spark(morhudi, hudi_fixtures_dir):
    failures = []
    for name in FIXTURE_NAMES:
        for query in QUERIES:
            df = morhudi.read.format("morhudi").option("query", query).load(table_path(hudi_fixtures_dir, name))
            if canonical_lines(_rows(df)) != expected_lines(name, query):
                failures.append((name, query))
    assert failures == []


def test_spark_time_travel_and_incremental_match_python(morhudi, hudi_fixtures_dir):
    from streamer.read import Table

    path = table_path(hudi_fixtures_dir, "quickstart_trips_table__mor__avro__v8_trips_8i3u1d")
    t = Table.open(path)
    first, *_rest, last = [i.timestamp for i in t.timeline.completed_writes()]
    df = morhudi.read.format("morhudi").option("as_of", first).load(path)
    assert canonical_lines(_rows(df)) == canonical_lines(t.read(as_of=first).to_pylist())
    df = morhudi.read.format("morhudi").option("query", "incremental").option("begin", first).option("end", last).load(path)
    assert canonical_lines(_rows(df)) == canonical_lines(t.read("incremental", begin=first, end=last).to_pylist())
    # Spark-side filters and projections compose with the source.
    df = morhudi.read.format("morhudi").load(path).where("city = 'chennai'").select("uuid")
    assert sorted(r.uuid for r in df.collect()) == sorted(
        r["uuid"] for r in t.read().to_pylist() if r["city"] == "chennai")

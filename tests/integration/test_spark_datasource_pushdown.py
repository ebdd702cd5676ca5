"""``format("morhudi")`` takes Spark's filters: fewer slices planned, the same rows (issue 13).

Pruning is asserted on what the plan holds (the reader's slices, Spark's input
partitions), never on time. Rows are compared with our own unfiltered read filtered by Arrow.
The pushdown tests register the source with ``pushdown=True`` (this Spark may leak a
pushed plan into a later unfiltered scan of the same relation, so auto leaves it off
there) and put the session's default registration back afterwards.
"""

from __future__ import annotations

import pyarrow.compute as pc
import pytest
from pyspark.sql.datasource import EqualTo, GreaterThan, In, IsNotNull, Not

from streamer.read import Table
from streamer.read.spark_source import (
    PUSHDOWN_CONF,
    MorHudiDataSource,
    register,
    spark_leaks_pushdown,
)
from tests.support import block_tables as tg

pytestmark = pytest.mark.integration

WHERE = "city = 'sf' AND ts > 50"
EXPR = (pc.field("city") == "sf") & (pc.field("ts") > 50)


@pytest.fixture(scope="module")
def table_path(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("pushdown") / "trips")
    tg.build(path, 6)
    return path


@pytest.fixture
def pushing(spark):
    before = spark.conf.get(PUSHDOWN_CONF, None)
    register(spark, pushdown=True)
    yield spark
    if before is None:
        spark.conf.unset(PUSHDOWN_CONF)
    else:
        spark.conf.set(PUSHDOWN_CONF, before)
    register(spark)


def _slices(path: str, city: str | None = None) -> int:
    return sum(1 for s in Table.open(path).fsview.latest_merged_slices() if city is None or s.partition_path == city)


def _expected(path: str) -> list[tuple]:
    return sorted((r["id"], r["value"]) for r in Table.open(path).read().filter(EXPR).to_pylist())


def test_pushed_filters_prune_the_plan_and_unsupported_ones_go_back(table_path):
    reader = MorHudiDataSource({"path": table_path}).reader(None)
    assert len(reader.partitions()) == _slices(table_path) > _slices(table_path, "sf")
    odd = EqualTo(("nested", "field"), 1)
    rest = reader.pushFilters([IsNotNull(("ts",)), EqualTo(("city",), "sf"), GreaterThan(("ts",), 50), odd,
                               Not(In(("id",), (1, 2)))])
    assert rest == [odd, Not(In(("id",), (1, 2)))]  # not translatable exactly: Spark keeps them
    assert len(reader.partitions()) == _slices(table_path, "sf")
    got = [r for p in reader.partitions() for b in reader.read(p) for r in b.to_pylist()]
    assert sorted((r["id"], r["value"]) for r in got) == _expected(table_path)


def test_a_filtered_spark_read_plans_only_the_matching_partitions(pushing, table_path):
    spark = pushing
    assert spark.conf.get(PUSHDOWN_CONF) == "true"  # register() turned it on
    df = spark.read.format("morhudi").load(table_path).where(WHERE).select("id", "value")
    assert df.rdd.getNumPartitions() == _slices(table_path, "sf")
    assert sorted((r.id, r.value) for r in df.collect()) == _expected(table_path)
    unfiltered = spark.read.format("morhudi").load(table_path)
    assert unfiltered.rdd.getNumPartitions() == _slices(table_path)
    assert sorted((r.id, r.value) for r in unfiltered.where(WHERE).collect()) == _expected(table_path)


def test_sql_by_name_prunes_too(pushing, table_path):
    pushing.sql(f"CREATE OR REPLACE TEMPORARY VIEW trips_pushdown USING morhudi OPTIONS (path '{table_path}')")
    df = pushing.sql(f"SELECT id, value FROM trips_pushdown WHERE {WHERE}")
    assert df.rdd.getNumPartitions() == _slices(table_path, "sf")
    assert sorted((r.id, r.value) for r in df.collect()) == _expected(table_path)


def test_auto_registration_keeps_reused_relations_right(spark, table_path):
    """Auto pushdown is off on a Spark that leaks a pushed plan; either way a view read
    with a pushable filter and then with none returns the right rows both times."""
    register(spark)
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW trips_auto USING morhudi OPTIONS (path '{table_path}')")
    assert sorted((r.id, r.value) for r in spark.sql(f"SELECT id, value FROM trips_auto WHERE {WHERE}").collect()
                  ) == _expected(table_path)
    either = (pc.field("city") == "sf") | (pc.field("ts") > 50)  # nothing Spark can push
    df = spark.sql("SELECT id FROM trips_auto WHERE city = 'sf' OR ts > 50")
    assert sorted(r.id for r in df.collect()) == sorted(r["id"] for r in Table.open(table_path).read().filter(
        either).to_pylist())
    if spark_leaks_pushdown(spark):
        assert df.rdd.getNumPartitions() == _slices(table_path)  # no pushdown: nothing pruned


def test_time_travel_before_the_first_commit_is_an_error(spark, table_path):
    first = Table.open(table_path).timeline.completed_writes()[0].timestamp
    with pytest.raises(Exception, match=f"before the first commit {first}"):
        spark.read.format("morhudi").option("as_of", "20000101000000000").load(table_path).collect()

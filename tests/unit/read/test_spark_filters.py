"""Spark's pushed filters become Arrow expressions only when Spark would give the same rows."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest
from pyspark.sql import datasource as sds

from streamer.read.spark_filters import to_expression

SCHEMA = pa.schema([("city", pa.string()), ("fare", pa.float64()), ("id", pa.int64()), ("day", pa.date32()),
                    ("at", pa.timestamp("us"))])
DATA = pa.table({
    "city": ["sf", None, "nyc", "sfo"], "fare": [10.0, float("nan"), None, 60.0], "id": [1, 2, None, 4],
    "day": [datetime.date(2024, 1, d) for d in (1, 2, 3, 4)], "at": [None] * 4,
}, schema=SCHEMA)


def _ids(f) -> list[int | None]:
    expr = to_expression(f, SCHEMA)
    assert expr is not None
    return [r["id"] for r in DATA.filter(expr).to_pylist()]


@pytest.mark.parametrize(("f", "ids"), [
    (sds.EqualTo(("city",), "sf"), [1]),
    (sds.Not(sds.EqualTo(("city",), "sf")), [None, 4]),  # null city: neither
    (sds.GreaterThan(("fare",), 50.0), [2, 4]),  # Spark: NaN is above every number
    (sds.GreaterThanOrEqual(("fare",), 10), [1, 2, 4]),
    (sds.LessThan(("fare",), 50.0), [1]),  # NaN is not below
    (sds.Not(sds.GreaterThan(("fare",), 50.0)), [1]),
    (sds.LessThanOrEqual(("id",), 2), [1, 2]),
    (sds.In(("city",), ("sf", "nyc")), [1, None]),
    (sds.IsNull(("city",)), [2]),
    (sds.Not(sds.IsNull(("city",))), [1, None, 4]),
    (sds.IsNotNull(("fare",)), [1, 2, 4]),
    (sds.StringStartsWith(("city",), "sf"), [1, 4]),
    (sds.StringEndsWith(("city",), "o"), [4]),
    (sds.StringContains(("city",), "y"), [None]),
    (sds.EqualTo(("day",), datetime.date(2024, 1, 2)), [2]),
])
def test_translations_match_spark_semantics(f, ids):
    assert _ids(f) == ids


@pytest.mark.parametrize("f", [
    sds.Not(sds.In(("id",), (1, 2))),  # Arrow: is_in(null) is false, NOT makes it true; SQL: null
    sds.In(("id",), (1, None)),
    sds.EqualTo(("id",), 1.5),  # a value of another kind
    sds.EqualTo(("fare",), float("nan")),
    sds.EqualTo(("at",), datetime.datetime(2024, 1, 1)),  # session time zone: Spark's business
    sds.EqualTo(("city", "inner"), "x"),  # nested
    sds.EqualTo(("missing",), 1),
    sds.EqualNullSafe(("id",), 1),
])
def test_what_cannot_be_exact_stays_with_spark(f):
    assert to_expression(f, SCHEMA) is None

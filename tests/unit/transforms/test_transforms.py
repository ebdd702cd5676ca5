"""Each transform on a real Spark DataFrame, and how failures are attributed."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter

from streamer.config.transforms import TransformConfig
from streamer.transforms import TransformError, apply_transforms

pytestmark = pytest.mark.integration

_ADAPTER = TypeAdapter(list[TransformConfig])


def run(spark, df, *steps):
    return apply_transforms(df, _ADAPTER.validate_python(list(steps)), spark)


@pytest.fixture()
def trips(spark):
    return spark.createDataFrame(
        [("a", 1000, "sf", (12.5, "USD")), ("b", 2000, "ams", (7.0, "EUR")), ("c", 3000, "sf", (None, None))],
        "uuid STRING, ts BIGINT, city STRING, fare STRUCT<amount: DOUBLE, currency: STRING>",
    )


def test_sql_binds_input_to_the_batch_and_cleans_up_its_view(spark, trips):
    out = run(spark, trips, {"type": "sql", "query": "SELECT uuid, ts * 2 AS ts2 FROM {input} WHERE city = 'sf'"})
    assert sorted((r.uuid, r.ts2) for r in out.collect()) == [("a", 2000), ("c", 6000)]
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("mor_streamer_input_")]


def test_flatten_uses_the_separator_and_keeps_order(spark, trips):
    out = run(spark, trips, {"type": "flatten", "separator": "__"})
    assert out.columns == ["uuid", "ts", "city", "fare__amount", "fare__currency"]
    assert out.where("uuid = 'a'").first().fare__amount == 12.5


def test_flatten_max_depth_and_collisions(spark):
    df = spark.createDataFrame([((1, (2,)), 9)], "a STRUCT<b: INT, c: STRUCT<d: INT>>, a_b INT")
    with pytest.raises(TransformError, match=r"transforms\[0\] \(flatten\).*duplicate column.*a_b"):
        run(spark, df, {"type": "flatten"})
    out = run(spark, df.drop("a_b"), {"type": "flatten", "max_depth": 1})
    assert out.columns == ["a_b", "a_c"] and out.first().a_c.d == 2


def test_rename_cast_drop_filter_derive_chain_in_order(spark, trips):
    out = run(
        spark,
        trips,
        {"type": "rename", "columns": {"ts": "event_ms"}},
        {"type": "derive", "columns": {"event_time": "timestamp_millis(event_ms)", "day": "to_date(event_time)"}},
        {"type": "cast", "columns": {"event_ms": "string"}},
        {"type": "filter", "condition": "fare.amount IS NOT NULL"},
        {"type": "drop", "columns": ["fare"]},
    )
    assert out.columns == ["uuid", "event_ms", "city", "event_time", "day"]
    assert dict(out.dtypes)["event_ms"] == "string"
    assert dict(out.dtypes)["day"] == "date"
    assert sorted(r.uuid for r in out.collect()) == ["a", "b"]


@pytest.mark.parametrize(
    ("step", "pattern"),
    [
        ({"type": "rename", "columns": {"nope": "x"}}, r"transforms\[1\] \(rename\).*nope"),
        ({"type": "drop", "columns": ["nope"]}, r"transforms\[1\] \(drop\).*nope"),
        ({"type": "cast", "columns": {"ts": "not_a_type"}}, r"transforms\[1\] \(cast\)"),
        ({"type": "filter", "condition": "missing_col > 1"}, r"transforms\[1\] \(filter\).*missing_col"),
        ({"type": "sql", "query": "SELECT nope FROM {input}"}, r"transforms\[1\] \(sql\).*nope"),
    ],
)
def test_failures_name_the_step(spark, trips, step, pattern):
    with pytest.raises(TransformError, match=pattern):
        run(spark, trips, {"type": "flatten"}, step)


def test_drop_ignore_missing(spark, trips):
    out = run(spark, trips, {"type": "drop", "columns": ["nope", "city"], "ignore_missing": True})
    assert "city" not in out.columns


# ------------------------------------------------------------------- python (a user's step)
STEPS = "tests.unit.transforms.user_steps"


def test_python_function_gets_the_batch_and_its_options(spark, trips):
    out = run(spark, trips, {"type": "python", "callable": f"{STEPS}:mask", "options": {"keep": 2}})
    assert sorted(r.uuid for r in out.collect()) == ["a***", "b***", "c***"]
    assert out.columns == trips.columns


def test_python_class_is_built_with_its_options_then_applied(spark, trips):
    out = run(spark, trips, {"type": "python", "callable": f"{STEPS}:AddCityCode", "options": {"length": 1}},
              {"type": "drop", "columns": ["fare"]})
    assert sorted((r.uuid, r.city_code) for r in out.collect()) == [("a", "S"), ("b", "A"), ("c", "S")]


@pytest.mark.parametrize(("spec", "message"), [
    (f"{STEPS}:not_a_frame", "returned list, not a Spark DataFrame"),
    (f"{STEPS}:broken", "no_such_column"),
    (f"{STEPS}:missing", f"module '{STEPS}' has no 'missing'"),
    (f"{STEPS}:NOT_CALLABLE", "is a int, not a function or class"),
    ("tests.unit.transforms.no_such_module:f", "cannot import module 'tests.unit.transforms.no_such_module'"),
])
def test_python_step_failures_name_the_step(spark, trips, spec, message):
    with pytest.raises(TransformError) as e:
        run(spark, trips, {"type": "rename", "columns": {"ts": "ts"}}, {"type": "python", "callable": spec})
    assert str(e.value).startswith("transforms[1] (python) failed: ")
    assert message in str(e.value)

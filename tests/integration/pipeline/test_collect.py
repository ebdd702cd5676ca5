"""``collect_together``: several frames in one Spark job, each coming back exactly as its
own ``toArrow`` would (rows, column names, Arrow types), empty frames included."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from streamer.pipeline.collect import collect_together

pytestmark = pytest.mark.integration


def _jobs(spark) -> int:
    tracker = spark.sparkContext.statusTracker()
    return max(tracker.getJobIdsForGroup(None) or [-1])


def test_frames_come_back_as_their_own_to_arrow_in_one_job(spark):
    rows = [
        (1, "a", dt.datetime(2026, 1, 2, 3, 4, 5), decimal.Decimal("1.25"), [1, 2], {"k": 1}, (7, "x")),
        (2, None, None, None, None, None, None),
    ]
    ddl = ("id BIGINT, `odd.name` STRING, `tick``s` TIMESTAMP, amount DECIMAL(10,2), xs ARRAY<INT>, "
           "m MAP<STRING,INT>, s STRUCT<a: INT, b: STRING>")
    first = spark.createDataFrame(rows, ddl)
    second = spark.createDataFrame([("only",)], "reason STRING")
    empty = spark.createDataFrame([], "n BIGINT, when DATE")
    count = first.groupBy().count()

    expected = [f.toArrow() for f in (first, second, empty, count)]
    before = _jobs(spark)
    got = collect_together(first, second, empty)
    assert _jobs(spark) == before + 1  # one job for all three
    # an aggregate adds its shuffle's map stage (a job of its own under adaptive execution)
    before = _jobs(spark)
    got_with_count = collect_together(first, second, empty, count)
    assert _jobs(spark) <= before + 2
    assert got_with_count[:3] == got
    for want, have in zip(expected, got_with_count, strict=True):
        assert have.schema == want.schema
        assert have.to_pylist() == want.to_pylist()


def test_one_frame_is_a_plain_to_arrow(spark):
    frame = spark.createDataFrame([(1,)], "x INT")
    (only,) = collect_together(frame)
    assert only.to_pylist() == [{"x": 1}]

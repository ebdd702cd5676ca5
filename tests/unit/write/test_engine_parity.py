"""The Spark engine writes an Arrow batch as the local engine does: the same keys and
partitions from a millisecond timestamp (Spark holds it as microseconds), and the types
Spark has no counterpart of cast to the table's types first, or refused by name - never
a value cut short."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from streamer.errors import SchemaError
from streamer.read import Table
from streamer.write import HudiWriter, TableConfig, WriteOptions

pytestmark = pytest.mark.integration  # a Spark session

MS = 1_700_000_000_123  # 2023-11-14T22:13:20.123


def _batch(v: str) -> pa.Table:
    return pa.table({"at": pa.array([MS], pa.timestamp("ms")), "day": pa.array([MS], pa.timestamp("ms")),
                     "v": [v]})


def test_a_millisecond_timestamp_keys_a_row_alike_on_both_engines(tmp_path, spark):
    path = str(tmp_path / "t")
    w = HudiWriter.create(path, TableConfig("t", ("at",), ("day",), None), options=WriteOptions(engine="local"))
    assert w.upsert(_batch("local")).input_rows == 1
    assert w.upsert(_batch("spark"), engine="spark").input_rows == 1  # counted while Spark wrote
    rows = Table.open(path).read().to_pylist()
    assert [(r["_hoodie_record_key"], r["_hoodie_partition_path"], r["v"]) for r in rows] == [
        (str(MS), str(MS), "spark")]  # one row: the Spark write updated the local one


def test_types_spark_has_no_counterpart_of_are_cast_or_refused_by_name(tmp_path, spark):
    base = {"id": [1], "ts": [1]}
    kinds = {"u32": pa.array([2**32 - 1], pa.uint32()), "d64": pa.array([86_400_000], pa.date64())}
    for name, column in kinds.items():
        path = str(tmp_path / name)
        HudiWriter.create(path, TableConfig("t", ("id",), (), "ts")).upsert(
            pa.table({**base, "c": column}), engine="spark")
        assert Table.open(path).read().column("c").to_pylist() == [
            {"u32": 2**32 - 1, "d64": datetime.date(1970, 1, 2)}[name]]
    refused = {"time32[ms]": pa.array([1000], pa.time32("ms")),
               "cannot cast timestamp[ns]": pa.array([1_700_000_000_123_456_789], pa.timestamp("ns"))}
    for i, (message, column) in enumerate(refused.items()):
        writer = HudiWriter.create(str(tmp_path / f"r{i}"), TableConfig("t", ("id",), (), "ts"))
        with pytest.raises(SchemaError, match=rf"field 'c': {message.replace('[', '.').replace(']', '.')}"):
            writer.upsert(pa.table({**base, "c": column}), engine="spark")

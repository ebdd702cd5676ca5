"""Hive column types and Spark's schema JSON from Arrow (Hudi's HiveSchemaUtil mapping)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from streamer.catalog.hive_schema import (
    hive_columns,
    hive_type,
    partition_columns,
    spark_schema_json,
)
from streamer.errors import ConfigError


@pytest.mark.parametrize(("arrow", "hive"), [
    (pa.bool_(), "boolean"),
    (pa.int8(), "int"),  # Parquet INT32 on disk: Hudi's sync reads int
    (pa.int32(), "int"),
    (pa.int64(), "bigint"),
    (pa.float32(), "float"),
    (pa.float64(), "double"),
    (pa.string(), "string"),
    (pa.large_string(), "string"),
    (pa.binary(), "binary"),
    (pa.decimal128(10, 2), "decimal(10,2)"),
    (pa.date32(), "date"),
    (pa.timestamp("us"), "bigint"),  # support_timestamp off, Hudi's default
    (pa.list_(pa.int64()), "array<bigint>"),
    (pa.map_(pa.string(), pa.float64()), "map<string,double>"),
    (pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))]), "struct<a:int,b:array<string>>"),
])
def test_hive_types(arrow, hive):
    assert hive_type(arrow) == hive


def test_timestamps_as_hive_timestamp_when_asked():
    assert hive_type(pa.timestamp("ms"), support_timestamp=True) == "timestamp"


def test_unknown_type_is_a_clear_error():
    with pytest.raises(ConfigError, match="no Hive type"):
        hive_type(pa.null())


SCHEMA = pa.schema([("id", pa.string()), ("city", pa.string()), ("ts", pa.int64()), ("day", pa.date32())])


def test_partition_columns_leave_the_data_columns_and_keep_their_type():
    assert hive_columns(SCHEMA, ["city", "day"]) == [("id", "string"), ("ts", "bigint")]
    assert partition_columns(SCHEMA, ["city", "day"]) == [("city", "string"), ("day", "date")]
    assert partition_columns(SCHEMA, ["ts"], typed=False) == [("ts", "string")]
    assert partition_columns(SCHEMA, ["missing"]) == [("missing", "string")]


def test_spark_schema_json_puts_partition_columns_last_with_metadata():
    doc = json.loads(spark_schema_json(SCHEMA, ["city"], {"k": "v"}))
    assert doc["type"] == "struct"
    assert [f["name"] for f in doc["fields"]] == ["id", "ts", "day", "city"]
    assert [f["type"] for f in doc["fields"]] == ["string", "long", "date", "string"]
    assert all(f["nullable"] is True and f["metadata"] == {"k": "v"} for f in doc["fields"])


def test_spark_schema_json_is_what_pyspark_parses():
    from pyspark.sql.types import StructType

    nested = pa.schema([("m", pa.map_(pa.string(), pa.int32())), ("l", pa.list_(pa.struct([("x", pa.float32())])))])
    parsed = StructType.fromJson(json.loads(spark_schema_json(nested, [])))
    assert parsed.simpleString() == "struct<m:map<string,int>,l:array<struct<x:float>>>"

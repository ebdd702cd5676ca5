"""Hudi's Hive sync conventions: table names, formats, parameters, partition values."""

from __future__ import annotations

import json

import pytest

from streamer.catalog import hudi_layout as hl


def test_mor_tables_as_hudi_names_them():
    specs = hl.table_specs("trips")
    assert [(s.name, s.input_format, s.read_optimized) for s in specs] == [
        ("trips_ro", "org.apache.hudi.hadoop.HoodieParquetInputFormat", True),
        ("trips_rt", "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat", False),
        ("trips", "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat", False),
    ]
    assert [s.name for s in hl.table_specs("trips", snapshot_with_table_name=False)] == ["trips_ro", "trips_rt"]
    # skip_ro_suffix wins over the plain-name snapshot, as in Hudi (the plain name is the RO table)
    specs = hl.table_specs("trips", skip_ro_suffix=True)
    assert [(s.name, s.read_optimized) for s in specs] == [("trips", True), ("trips_rt", False)]


def test_formats_and_serde_are_hudis():
    assert hl.OUTPUT_FORMAT == "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
    assert hl.SERDE == "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


def test_locations(tmp_path):
    assert hl.location_uri("s3a://bucket/lake/t/") == "s3a://bucket/lake/t"
    assert hl.location_uri(str(tmp_path / "t")) == f"file:{tmp_path}/t"
    assert hl.partition_location("file:/x/t", "a/b") == "file:/x/t/a/b"
    assert hl.partition_location("file:/x/t", "") == "file:/x/t"


@pytest.mark.parametrize(("path", "fields", "decode", "values"), [
    ("sf", ["city"], False, ["sf"]),
    ("city=sf", ["city"], False, ["sf"]),
    ("2024/01/31", ["ts"], False, ["2024/01/31"]),  # one field: the whole path
    ("us/sf", ["country", "city"], False, ["us", "sf"]),
    ("country=us/city=sf", ["country", "city"], False, ["us", "sf"]),
    ("a%2Fb", ["k"], True, ["a/b"]),
    ("", [], False, []),
])
def test_partition_values(path, fields, decode, values):
    assert hl.partition_values(path, fields, decode=decode) == values


def test_partition_path_with_wrong_depth_is_refused():
    with pytest.raises(ValueError, match="2 field"):
        hl.partition_values("us/sf/x", ["country", "city"])


def test_spark_parameters_split_the_schema_in_parts():
    schema = "x" * 9001
    params = hl.spark_table_parameters(schema, ["city", "day"], 4000, "3.5.3")
    assert params["spark.sql.sources.provider"] == "hudi"
    assert params["spark.sql.create.version"] == "3.5.3"
    assert params["spark.sql.sources.schema.numParts"] == "3"
    assert "".join(params[f"spark.sql.sources.schema.part.{i}"] for i in range(3)) == schema
    assert len(params["spark.sql.sources.schema.part.0"]) == 4000
    assert params["spark.sql.sources.schema.numPartCols"] == "2"
    assert [params["spark.sql.sources.schema.partCol.0"], params["spark.sql.sources.schema.partCol.1"]] == ["city", "day"]
    assert "spark.sql.create.version" not in hl.spark_table_parameters("{}", [], 4000, None)
    assert "spark.sql.sources.schema.numPartCols" not in hl.spark_table_parameters("{}", [], 4000, None)


def test_serde_parameters_and_source_options():
    assert hl.spark_serde_parameters("file:/t", True) == {"path": "file:/t", "hoodie.query.as.ro.table": "true"}
    ro, rt, _ = hl.table_specs("t")
    assert json.loads(hl.source_options("file:/t", ro)["morhudi.options"]) == {"path": "file:/t", "query": "read_optimized"}
    assert json.loads(hl.source_options("file:/t", rt)["morhudi.options"]) == {"path": "file:/t", "query": "snapshot"}

"""A column a batch holds no value in is written in the table's type
(streamer/pipeline/null_columns.py): JSON inference types an all-null field as a string."""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamer.errors import SchemaError
from streamer.pipeline.null_columns import typed_like_table
from streamer.write.schema import reconcile

TABLE = pa.schema([("id", pa.int64()), ("qty", pa.int64()), ("name", pa.string())])


def test_an_all_null_column_of_another_type_takes_the_tables():
    batch = pa.table({"id": [1, 2], "qty": pa.array([None, None], pa.string()), "new": pa.array([None, None], pa.string())})
    with pytest.raises(SchemaError, match="'qty': type change from int64 to string"):
        reconcile(TABLE, batch.schema, ("id",))
    out = typed_like_table(batch, lambda: TABLE)
    assert out.schema.field("qty").type == pa.int64() and out.column("qty").null_count == 2
    assert out.schema.field("new").type == pa.string()  # not the table's: a new column as it came
    reconcile(TABLE, out.schema, ("id",))


def test_a_column_with_a_value_keeps_its_type_and_the_writer_decides():
    batch = pa.table({"id": [1, 2], "qty": pa.array([None, "many"], pa.string())})
    assert typed_like_table(batch, lambda: TABLE) is batch
    assert typed_like_table(batch, lambda: None) is batch  # no table yet: nothing to take a type from
    same = pa.table({"id": [1], "qty": pa.array([None], pa.int64())})
    assert typed_like_table(same, lambda: TABLE) is same  # the table's own type: nothing to do


@pytest.mark.integration
def test_on_spark_too(spark):
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    df = spark.createDataFrame([(1, None), (2, None)], StructType([StructField("id", LongType()),
                                                                   StructField("qty", StringType())]))
    out = typed_like_table(df, lambda: TABLE)
    assert dict(out.dtypes) == {"id": "bigint", "qty": "bigint"} and out.count() == 2
    valued = spark.createDataFrame([(1, "x")], df.schema)
    assert dict(typed_like_table(valued, lambda: TABLE).dtypes)["qty"] == "string"

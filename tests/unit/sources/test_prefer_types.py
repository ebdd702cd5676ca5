"""``prefer_types``: an inferred schema takes the table's types for the columns the table has."""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from streamer.sources.files import prefer_types


def _struct(**fields) -> StructType:
    return StructType([StructField(n, t, True) for n, t in fields.items()])


def test_known_columns_take_the_table_type_new_ones_keep_theirs():
    inferred = _struct(id=StringType(), ts=StringType(), fare=LongType(), extra=BooleanType(),
                       a=_struct(x=StringType(), new=IntegerType()))
    table = _struct(id=StringType(), ts=LongType(), fare=DoubleType(), a=_struct(x=LongType(), y=StringType()),
                    gone=IntegerType())
    assert prefer_types(inferred, table).simpleString() == (
        "struct<id:string,ts:bigint,fare:double,extra:boolean,a:struct<x:bigint,y:string,new:int>>"
    )

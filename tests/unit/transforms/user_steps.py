"""Users' own transform steps, imported by name (``tests.unit.transforms.user_steps:...``)
by the ``python`` transform tests."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def mask(df: DataFrame, *, column: str = "uuid", keep: int = 1) -> DataFrame:
    """Keeps the first ``keep`` characters of ``column`` and stars the rest."""
    return df.withColumn(column, F.concat(F.substring(column, 1, keep), F.lit("***")))


class AddCityCode:
    """A class step: configured by its constructor, applied by ``apply(df)``."""

    def __init__(self, *, length: int = 2) -> None:
        self.length = length

    def apply(self, df: DataFrame) -> DataFrame:
        return df.withColumn("city_code", F.upper(F.substring("city", 1, self.length)))


def not_a_frame(df: DataFrame) -> list:
    return df.collect()


def broken(df: DataFrame) -> DataFrame:
    return df.select("no_such_column")


NOT_CALLABLE = 42

"""Column-level transforms: rename, cast, drop, filter, derive."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamer.config.transforms import (
    CastTransformConfig,
    DeriveTransformConfig,
    DropTransformConfig,
    FilterTransformConfig,
    RenameTransformConfig,
)
from streamer.transforms.base import quote, require_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class RenameTransform:
    """``{old: new}``; renaming a column that does not exist is an error, not a no-op."""

    def __init__(self, config: RenameTransformConfig) -> None:
        self.config = config

    def apply(self, df: DataFrame, spark: SparkSession) -> DataFrame:
        require_columns(df, list(self.config.columns), "rename")
        return df.withColumnsRenamed(dict(self.config.columns))


class CastTransform:
    """``{column: spark_sql_type}`` (anything ``CAST(x AS <type>)`` accepts)."""

    def __init__(self, config: CastTransformConfig) -> None:
        self.config = config

    def apply(self, df: DataFrame, spark: SparkSession) -> DataFrame:
        from pyspark.sql import functions as F

        require_columns(df, list(self.config.columns), "cast")
        return df.withColumns({c: F.col(quote(c)).cast(t) for c, t in self.config.columns.items()})


class DropTransform:
    def __init__(self, config: DropTransformConfig) -> None:
        self.config = config

    def apply(self, df: DataFrame, spark: SparkSession) -> DataFrame:
        if not self.config.ignore_missing:
            require_columns(df, self.config.columns, "drop")
        return df.drop(*self.config.columns)


class FilterTransform:
    """Keep rows where the SQL condition is true (NULL counts as false, as in SQL)."""

    def __init__(self, config: FilterTransformConfig) -> None:
        self.config = config

    def apply(self, df: DataFrame, spark: SparkSession) -> DataFrame:
        from pyspark.sql import functions as F

        return df.where(F.expr(self.config.condition))


class DeriveTransform:
    """``{column: expression}``, applied in order so a later expression can use an earlier column."""

    def __init__(self, config: DeriveTransformConfig) -> None:
        self.config = config

    def apply(self, df: DataFrame, spark: SparkSession) -> DataFrame:
        from pyspark.sql import functions as F

        for column, expression in self.config.columns.items():
            df = df.withColumn(column, F.expr(expression))
        return df


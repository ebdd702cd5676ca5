"""``{type: python, callable: "package.module:name", options: {...}}``: a user's own step."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamer.config.transforms import PythonTransformConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class PythonTransform:
    """Calls the user's function (or an instance of the user's class) with the batch and
    checks it returned a DataFrame: anything else would fail later, far from its cause."""

    def __init__(self, config: PythonTransformConfig) -> None:
        self.config = config

    def apply(self, df: DataFrame, spark: SparkSession) -> DataFrame:  # noqa: ARG002 - df.sparkSession
        from pyspark.sql import DataFrame as SparkDataFrame

        target = self.config.resolve()
        options = dict(self.config.options)
        if inspect.isclass(target):
            instance: Any = target(**options)
            step: Callable[..., Any] = instance.apply if hasattr(instance, "apply") else instance
            out = step(df)
        else:
            out = target(df, **options)
        if not isinstance(out, SparkDataFrame):
            raise TypeError(f"{self.config.callable} returned {type(out).__name__}, not a Spark DataFrame")
        return out

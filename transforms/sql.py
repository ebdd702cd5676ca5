"""``{type: sql, query: "SELECT ... FROM {input}"}``."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from streamer.config.transforms import INPUT_PLACEHOLDER, SqlTransformConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class SqlTransform:
    """Runs the query with ``{input}`` bound to the batch.

    The batch is registered under a fresh unique view name per call (not a fixed
    name), so concurrent pipelines in one SparkSession never read each other's batch;
    the view is dropped after the query is analysed (the plan no longer needs it).
    """

    def __init__(self, config: SqlTransformConfig) -> None:
        self.config = config

    def apply(self, df: DataFrame, spark: SparkSession) -> DataFrame:
        view = f"mor_streamer_input_{uuid.uuid4().hex}"
        df.createOrReplaceTempView(view)
        try:
            return spark.sql(self.config.query.replace(INPUT_PLACEHOLDER, view))
        finally:
            spark.catalog.dropTempView(view)

"""The transform contract: ``apply(df, spark) -> df``, one small class per ``type``.

Transforms are pure DataFrame → DataFrame steps; they see only the batch, so a
replayed batch transforms identically. Failures are :class:`TransformError` naming
the transform's index and type in the pipeline's ``transforms`` list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from streamer.errors import StreamerError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class TransformError(StreamerError):
    """A transform could not be applied to a batch (names the transform)."""


class Transform(Protocol):
    def apply(self, df: DataFrame, spark: SparkSession) -> DataFrame: ...


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier (handles dots, spaces, backticks)."""
    return "`" + name.replace("`", "``") + "`"


def require_columns(df: DataFrame, names: list[str], what: str) -> None:
    missing = [n for n in names if n not in df.columns]
    if missing:
        raise ValueError(f"{what}: no column(s) {missing} in the batch (columns: {df.columns})")

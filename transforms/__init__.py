"""Transforms: per-batch DataFrame steps, chained in the order the pipeline lists them.

``build_transform(config)`` makes one step from its validated config;
``apply_transforms(df, configs, spark)`` runs a whole ``transforms:`` list and wraps
any failure in :class:`TransformError` naming the step (``transforms[2] (cast)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from streamer.config.transforms import (
    CastTransformConfig,
    DeriveTransformConfig,
    DropTransformConfig,
    FilterTransformConfig,
    FlattenTransformConfig,
    PythonTransformConfig,
    RenameTransformConfig,
    SqlTransformConfig,
    TransformConfig,
)
from streamer.errors import first_line
from streamer.transforms.base import Transform, TransformError
from streamer.transforms.columns import (
    CastTransform,
    DeriveTransform,
    DropTransform,
    FilterTransform,
    RenameTransform,
)
from streamer.transforms.flatten import FlattenTransform
from streamer.transforms.python import PythonTransform
from streamer.transforms.sql import SqlTransform

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_REGISTRY: dict[type, type] = {
    SqlTransformConfig: SqlTransform,
    FlattenTransformConfig: FlattenTransform,
    RenameTransformConfig: RenameTransform,
    CastTransformConfig: CastTransform,
    DropTransformConfig: DropTransform,
    FilterTransformConfig: FilterTransform,
    DeriveTransformConfig: DeriveTransform,
    PythonTransformConfig: PythonTransform,
}


def build_transform(config: TransformConfig) -> Transform:
    return _REGISTRY[type(config)](config)


def apply_transforms(
    df: DataFrame, configs: Sequence[TransformConfig], spark: SparkSession | None = None
) -> DataFrame:
    """Apply each transform in order. Spark analyses eagerly, so a bad column or SQL
    error surfaces here, attributed to its step, not later inside the writer."""
    spark = spark or df.sparkSession
    for i, config in enumerate(configs):
        try:
            df = build_transform(config).apply(df, spark)
        except Exception as e:
            raise TransformError(f"transforms[{i}] ({config.type}) failed: {first_line(e)}") from e
    return df


__all__ = ["Transform", "TransformError", "apply_transforms", "build_transform"]

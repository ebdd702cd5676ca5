"""``{type: flatten, separator: "_"}``: nested struct fields become top-level columns.

``fare: {amount, currency}`` → ``fare_amount``, ``fare_currency``. Arrays and maps
are left as they are (flattening them would change the number of rows). A flattened
name that collides with an existing column is an error rather than a silent overwrite.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamer.config.transforms import FlattenTransformConfig
from streamer.transforms.base import quote

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType


class FlattenTransform:
    def __init__(self, config: FlattenTransformConfig) -> None:
        self.config = config

    def apply(self, df: DataFrame, spark: SparkSession) -> DataFrame:
        columns = flatten_columns(df.schema, self.config.separator, self.config.max_depth)
        names = [name for name, _ in columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"flatten would create duplicate column(s) {dupes}; choose another separator")
        return df.select(*[col.alias(name) for name, col in columns])


def flatten_columns(schema: StructType, separator: str, max_depth: int | None) -> list[tuple[str, Column]]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    out: list[tuple[str, Column]] = []

    def walk(struct: StructType, prefix: list[str], depth: int) -> None:
        for field in struct.fields:
            path = [*prefix, field.name]
            if isinstance(field.dataType, StructType) and (max_depth is None or depth < max_depth):
                walk(field.dataType, path, depth + 1)
            else:
                out.append((separator.join(path), F.col(".".join(quote(p) for p in path))))

    walk(schema, [], 0)
    return out

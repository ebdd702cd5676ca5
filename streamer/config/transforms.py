"""Transform configs: ``transforms: [{type: sql|flatten|rename|cast|drop|filter|derive, ...}]``.

Only shape is checked here (Spark parses SQL when the pipeline starts); the
implementations are in the top-level ``transforms`` package.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from streamer.config.base import StrictModel

INPUT_PLACEHOLDER = "{input}"

NonEmptyStr = Annotated[str, Field(min_length=1)]


class SqlTransformConfig(StrictModel):
    """A Spark SQL query over the batch; ``{input}`` names the batch's temp view."""

    type: Literal["sql"]
    query: NonEmptyStr

    @field_validator("query")
    @classmethod
    def _has_input(cls, v: str) -> str:
        if INPUT_PLACEHOLDER not in v:
            raise ValueError("query must select from {input} (the batch's temporary view)")
        return v


class FlattenTransformConfig(StrictModel):
    """Nested structs become top-level columns: ``fare.amount`` → ``fare_amount``."""

    type: Literal["flatten"]
    separator: str = "_"
    #: Levels of nesting to flatten; None = all.
    max_depth: Annotated[int, Field(gt=0)] | None = None


class RenameTransformConfig(StrictModel):
    type: Literal["rename"]
    columns: dict[NonEmptyStr, NonEmptyStr] = Field(min_length=1)


class CastTransformConfig(StrictModel):
    """``{column: spark_sql_type}``, e.g. ``{ts: timestamp, fare: "decimal(10,2)"}``."""

    type: Literal["cast"]
    columns: dict[NonEmptyStr, NonEmptyStr] = Field(min_length=1)


class DropTransformConfig(StrictModel):
    type: Literal["drop"]
    columns: list[NonEmptyStr] = Field(min_length=1)
    #: A missing column is an error by default: a typo must not silently keep a column.
    ignore_missing: bool = False


class FilterTransformConfig(StrictModel):
    """Keep rows where the SQL condition is true."""

    type: Literal["filter"]
    condition: NonEmptyStr


class DeriveTransformConfig(StrictModel):
    """``{column: sql_expression}``; added (or replaced) in order, so later ones may use earlier."""

    type: Literal["derive"]
    columns: dict[NonEmptyStr, NonEmptyStr] = Field(min_length=1)


TransformConfig = Annotated[
    SqlTransformConfig
    | FlattenTransformConfig
    | RenameTransformConfig
    | CastTransformConfig
    | DropTransformConfig
    | FilterTransformConfig
    | DeriveTransformConfig,
    Field(discriminator="type"),
]

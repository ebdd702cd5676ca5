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

    #: Transform kind: a Spark SQL query (HoodieStreamer's ``SqlQueryBasedTransformer``).
    type: Literal["sql"]
    #: A ``SELECT ... FROM {input}``; its result replaces the batch (``<SRC>`` in HoodieStreamer).
    query: NonEmptyStr

    @field_validator("query")
    @classmethod
    def _has_input(cls, v: str) -> str:
        if INPUT_PLACEHOLDER not in v:
            raise ValueError("query must select from {input} (the batch's temporary view)")
        return v


class FlattenTransformConfig(StrictModel):
    """Nested structs become top-level columns: ``fare.amount`` → ``fare_amount``."""

    #: Transform kind: flatten nested structs (like Hudi's ``FlatteningTransformer``).
    type: Literal["flatten"]
    #: Joins parent and child field names in the new column names.
    separator: str = "_"
    #: Levels of nesting to flatten; None = all.
    max_depth: Annotated[int, Field(gt=0)] | None = None


class RenameTransformConfig(StrictModel):
    #: Transform kind: rename columns.
    type: Literal["rename"]
    #: ``{old_name: new_name}``; renaming a column that does not exist is an error.
    columns: dict[NonEmptyStr, NonEmptyStr] = Field(min_length=1)


class CastTransformConfig(StrictModel):
    """``{column: spark_sql_type}``, e.g. ``{ts: timestamp, fare: "decimal(10,2)"}``."""

    #: Transform kind: change column types.
    type: Literal["cast"]
    #: ``{column: spark_sql_type}`` as in ``CAST(column AS type)``; a missing column is an error.
    columns: dict[NonEmptyStr, NonEmptyStr] = Field(min_length=1)


class DropTransformConfig(StrictModel):
    #: Transform kind: remove columns.
    type: Literal["drop"]
    #: Columns to remove.
    columns: list[NonEmptyStr] = Field(min_length=1)
    #: A missing column is an error by default: a typo must not silently keep a column.
    ignore_missing: bool = False


class FilterTransformConfig(StrictModel):
    """Keep rows where the SQL condition is true."""

    #: Transform kind: keep matching rows.
    type: Literal["filter"]
    #: Spark SQL boolean expression; rows where it is false or NULL are dropped (not error rows).
    condition: NonEmptyStr


class DeriveTransformConfig(StrictModel):
    """``{column: sql_expression}``; added (or replaced) in order, so later ones may use earlier."""

    #: Transform kind: add or replace computed columns.
    type: Literal["derive"]
    #: ``{column: spark_sql_expression}``, evaluated in order (``withColumn``).
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

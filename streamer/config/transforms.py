"""Transform configs: ``transforms: [{type: sql|flatten|rename|cast|drop|filter|derive|python, ...}]``.

Only shape is checked here (Spark parses SQL when the pipeline starts); the
implementations are in the top-level ``transforms`` package.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

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


#: The transform kinds that only reshape the batch: neither SQL text (a query, a condition or
#: an expression may name a table) nor a user's code. A pipeline of only these reads no table
#: through Spark, so its session skips registering the ``morhudi`` source (``streamer.spark``).
TABLE_FREE_TYPES = frozenset({"flatten", "rename", "cast", "drop"})


#: ``package.module:attribute`` (the attribute may be dotted: ``module:Class.factory``).
CALLABLE_PATTERN = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


class PythonTransformConfig(StrictModel):
    """A user's own step: a Python function or class, DataFrame in, DataFrame out.

    A function is called as ``function(df, **options)``; a class is instantiated with
    ``**options`` and its instance's ``apply(df)`` (or the instance itself) is called with
    the batch. Spark's session is ``df.sparkSession``. The module must be importable by the
    interpreter that runs the pipeline (installed, or on ``PYTHONPATH``); ``streamer
    validate`` imports it. Like every step it must be deterministic: a replayed batch is
    transformed again."""

    #: Transform kind: your own code (HoodieStreamer's ``--transformer-class``).
    type: Literal["python"]
    #: ``package.module:function`` or ``package.module:Class``.
    callable: NonEmptyStr
    #: Keyword arguments passed to the function (or the class's constructor).
    options: dict[NonEmptyStr, Any] = Field(default_factory=dict)

    @field_validator("callable")
    @classmethod
    def _module_and_name(cls, v: str) -> str:
        if not CALLABLE_PATTERN.match(v):
            raise ValueError(f"{v!r} is not 'package.module:name' (a module, a colon, then the "
                             "function or class in it)")
        return v

    def resolve(self) -> Callable[..., Any]:
        """The function or class ``callable`` names; ``ImportError`` saying what is missing."""
        module_name, _, attr = self.callable.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            raise ImportError(f"cannot import module {module_name!r} ({e}); is it installed or on "
                              "PYTHONPATH?") from e
        target: Any = module
        for part in attr.split("."):
            if not hasattr(target, part):
                raise ImportError(f"module {module_name!r} has no {attr!r}")
            target = getattr(target, part)
        if not callable(target):
            raise ImportError(f"{self.callable} is a {type(target).__name__}, not a function or class")
        return target


TransformConfig = Annotated[
    SqlTransformConfig
    | FlattenTransformConfig
    | RenameTransformConfig
    | CastTransformConfig
    | DropTransformConfig
    | FilterTransformConfig
    | DeriveTransformConfig
    | PythonTransformConfig,
    Field(discriminator="type"),
]

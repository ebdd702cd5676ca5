"""Spark's pushed filters (``pyspark.sql.datasource``) as Arrow expressions, exactly or not at all.

Spark does not evaluate a filter the source accepts, so a translation must give the
same rows as Spark SQL would, nulls and NaN included; anything else returns ``None`` and
stays with Spark. Why each restriction:

- only top-level columns of the read's schema, and values of the column's own kind
  (int for integers, int/float for floating point, str, bool, date): other Python values
  (timestamps in the session time zone, decimals, bytes) would compare differently;
- ``x > v`` / ``x >= v`` on a floating point column also keep NaN (Spark orders NaN above
  every number; Arrow's comparisons are false for it); a NaN value is never pushed;
- ``IN`` is pushed only when not under ``NOT``: Arrow's ``is_in`` is false, not null, for
  a null ``x``, which ``NOT`` would turn into true. Comparisons, ``LIKE`` and
  ``IS [NOT] NULL`` have SQL's null behaviour, so ``NOT`` of them is exact.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import datasource as sds


def _column(attribute: tuple[str, ...], schema: pa.Schema) -> pa.Field | None:
    if len(attribute) != 1 or attribute[0] not in schema.names:
        return None
    return schema.field(attribute[0])


def _fits(value: Any, t: pa.DataType) -> bool:
    """Whether ``value`` compares with a column of type ``t`` as Spark compares it."""
    if value is None:
        return False
    if isinstance(value, bool):
        return pa.types.is_boolean(t)
    if isinstance(value, int):
        return pa.types.is_integer(t) or pa.types.is_floating(t)
    if isinstance(value, float):
        return pa.types.is_floating(t) and not math.isnan(value)
    if isinstance(value, str):
        return pa.types.is_string(t) or pa.types.is_large_string(t)
    if isinstance(value, datetime.datetime):
        return False
    if isinstance(value, datetime.date):
        return pa.types.is_date(t)
    return False


_COMPARE = {
    sds.EqualTo: lambda x, v: x == v,
    sds.GreaterThan: lambda x, v: x > v,
    sds.GreaterThanOrEqual: lambda x, v: x >= v,
    sds.LessThan: lambda x, v: x < v,
    sds.LessThanOrEqual: lambda x, v: x <= v,
}
_STRING = {
    sds.StringStartsWith: pc.starts_with,
    sds.StringEndsWith: pc.ends_with,
    sds.StringContains: pc.match_substring,
}


def to_expression(f: Any, schema: pa.Schema, *, negated: bool = False) -> pc.Expression | None:
    """The Arrow expression for Spark filter ``f`` over ``schema``, or ``None``."""
    if isinstance(f, sds.Not):
        inner = to_expression(f.child, schema, negated=not negated)
        return None if inner is None else ~inner
    field = _column(getattr(f, "attribute", ()), schema)
    if field is None:
        return None
    x = pc.field(field.name)
    if type(f) in _COMPARE:
        if not _fits(f.value, field.type):
            return None
        expr = _COMPARE[type(f)](x, f.value)
        if pa.types.is_floating(field.type) and isinstance(f, sds.GreaterThan | sds.GreaterThanOrEqual):
            expr = expr | pc.is_nan(x)  # Spark: NaN is greater than any number
        return expr
    if isinstance(f, sds.In):
        values = list(f.value)
        if negated or not values or not all(_fits(v, field.type) for v in values):
            return None
        return x.isin(values)
    if isinstance(f, sds.IsNull):
        return x.is_null()
    if isinstance(f, sds.IsNotNull):
        return x.is_valid()
    if type(f) in _STRING:
        if not (isinstance(f.value, str) and _fits(f.value, field.type)):
            return None
        return _STRING[type(f)](x, pattern=f.value)
    return None

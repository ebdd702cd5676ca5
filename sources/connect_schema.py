"""Kafka Connect schemas → Spark types: JSON with embedded schemas decoded by what the
database said, not by what its values look like.

Kafka Connect's ``JsonConverter`` with ``schemas.enable`` writes each record's Connect
schema beside its value (``{"schema": ..., "payload": ...}``). The values alone cannot
tell an ``int`` column from a ``bigint``, a ``date`` (a day number) from a count, or a
``numeric(12,2)`` (base64 of its unscaled value) from text; the schema can. Kafka Connect
names its logical types in it (``org.apache.kafka.connect.data.Decimal``, ``Date``,
``Timestamp``) and Debezium its semantic ones (``io.debezium.time.MicroTimestamp``...). So
a batch is parsed with each field's *physical* type (what the JSON holds, see
:func:`physical_type`), the field's Connect schema kept in the Spark field's metadata, and
each named field then becomes its *logical* type (:func:`to_logical`):

============================================================  ==============================
Connect schema (JSON value)                                   column
============================================================  ==============================
``int8/16/32/64``, ``float``, ``double``, ``boolean``, ``string``  tinyint ... double, boolean,
                                                              string
``bytes`` (base64 text)                                       binary
``...connect.data.Decimal`` (base64 of the unscaled           ``decimal(p, s)`` from its
two's-complement integer; Debezium's default                  parameters; p over 38 is
``decimal.handling.mode: precise``)                           refused (Spark's, Hudi's limit)
``...connect.data.Date``, ``io.debezium.time.Date`` (days)    date
``...connect.data.Timestamp``, ``io.debezium.time.Timestamp``  timestamp
(ms), ``MicroTimestamp`` (µs), ``NanoTimestamp`` (ns, kept
to µs)
``io.debezium.time.ZonedTimestamp`` (ISO-8601, an offset)     timestamp (that instant)
``io.debezium.data.VariableScaleDecimal`` (``numeric``        string: the exact value (no
without a precision: ``{scale, value}``)                      fixed scale to give it)
array, map with string keys, struct                           the same of the above
============================================================  ==============================

A ZonedTimestamp outside Spark's timestamps (``infinity``, years past 9999 or BC) is no
column value: :func:`value_errors` gives its record's reason to be an error row.

Times of day (``Time``, ``MicroTime``, ``NanoTime``, ``ZonedTime``), intervals, and the
other named types (``Json``, ``Uuid``, ``Enum``...) keep their physical type: Spark and
Hudi's readers have no time-of-day type. A ``timestamp`` without a time zone becomes a
Spark timestamp read at UTC, as the pipelines' sessions are (its wall time unchanged).

One batch may carry several schemas (a column added mid-batch): :func:`merge` takes the
union of their fields, a number widening to the wider type; any other disagreement parses
that field as text, and the table's schema rules then refuse or accept it by name.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from streamer.errors import SourceError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructField, StructType

log = logging.getLogger(__name__)

#: The Spark field metadata key that holds a field's Connect schema (its children aside).
METADATA_KEY = "connect"

DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"
DATES = frozenset({"org.apache.kafka.connect.data.Date", "io.debezium.time.Date"})
#: Timestamps as a number since the epoch: the name and the units of a second it counts.
EPOCH_TIMESTAMPS: Mapping[str, int] = {
    "org.apache.kafka.connect.data.Timestamp": 1_000,
    "io.debezium.time.Timestamp": 1_000,
    "io.debezium.time.MicroTimestamp": 1_000_000,
    "io.debezium.time.NanoTimestamp": 1_000_000_000,
}
_CONVERTED = frozenset({DECIMAL, VARIABLE_DECIMAL, ZONED_TIMESTAMP, *DATES, *EPOCH_TIMESTAMPS})
#: What Avro needs converted: the named types its converters give no Avro logical type.
_AVRO_CONVERTED = _CONVERTED - {DECIMAL}
#: Spark's and Hudi's timestamps, 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z, as
#: microseconds since the epoch (Spark's documented range; Python's datetime, which
#: reads them back, has the same).
TIMESTAMP_MICROS = (-62_135_596_800_000_000, 253_402_300_799_999_999)
TIMESTAMP_RANGE = "0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z"
#: Spark's (and Hudi's, through Avro's fixed decimals) widest decimal.
MAX_PRECISION = 38
#: Connect's primitive types as the JsonConverter spells them (``float`` and ``double`` for
#: FLOAT32/FLOAT64), and the Spark type of their JSON values (bytes: base64 text).
_PRIMITIVES = {"int8": "tinyint", "int16": "smallint", "int32": "int", "int64": "bigint", "float": "float",
               "double": "double", "boolean": "boolean", "string": "string", "bytes": "string"}
#: Numeric types in widening order (a field seen as two of them takes the wider).
_WIDENING = ("tinyint", "smallint", "int", "bigint", "float", "double")


# -- physical types -------------------------------------------------------------------


def physical_type(schema: Mapping[str, Any], where: str) -> DataType:
    """The Spark type ``from_json`` parses a value of Connect ``schema`` as (``where``
    names the field in errors)."""
    from pyspark.sql.types import ArrayType, MapType, StringType, StructType

    kind = schema.get("type")
    if kind == "struct":
        fields = schema.get("fields")
        if not isinstance(fields, list):
            raise SourceError(f"{where}: a Connect struct schema without fields")
        if not all(isinstance(f, Mapping) for f in fields):
            raise SourceError(f"{where}: a Connect struct schema whose fields are not schemas")
        return StructType([physical_field(f, f"{where}.{f.get('field')}") for f in fields])
    if kind == "array":
        return ArrayType(physical_type(_child(schema, "items", where), f"{where}[]"), True)
    if kind == "map":
        if _child(schema, "keys", where).get("type") != "string":
            return StringType()  # written as [[key, value], ...]: kept as that JSON text
        return MapType(StringType(), physical_type(_child(schema, "values", where), f"{where}{{}}"), True)
    primitive = _PRIMITIVES.get(str(kind))
    if primitive is None:
        raise SourceError(f"{where}: Connect type {kind!r} is not one Kafka Connect defines")
    return _spark_primitive(primitive)


def _spark_primitive(name: str) -> DataType:
    from pyspark.sql import types as T

    return {"tinyint": T.ByteType(), "smallint": T.ShortType(), "int": T.IntegerType(), "bigint": T.LongType(),
            "float": T.FloatType(), "double": T.DoubleType(), "boolean": T.BooleanType(),
            "string": T.StringType()}[name]


def physical_field(schema: Mapping[str, Any], where: str) -> StructField:
    """A struct member of Connect ``schema`` as a nullable Spark field, its Connect schema
    (without its children's, which their own fields carry) in the metadata."""
    from pyspark.sql.types import StructField

    name = schema.get("field")
    if not isinstance(name, str):
        raise SourceError(f"{where}: a Connect struct field without a name")
    return StructField(name, physical_type(schema, where), True, {METADATA_KEY: _own(schema)})


def _child(schema: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    child = schema.get(key)
    if not isinstance(child, Mapping):
        raise SourceError(f"{where}: a Connect {schema.get('type')} schema without {key!r}")
    return child


def _own(schema: Mapping[str, Any]) -> dict[str, Any]:
    """What converting a value needs of ``schema``: its type, name and parameters, and
    the same of its array items and map values (a struct's fields carry their own)."""
    out: dict[str, Any] = {"type": schema.get("type")}
    for key in ("name", "parameters"):
        if schema.get(key) is not None:
            out[key] = schema[key]
    for key in ("items", "values"):
        if isinstance(schema.get(key), Mapping):
            out[key] = _own(schema[key])
    return out


def envelope_type(schemas: list[str]) -> StructType | None:
    """The decode schema (``{payload: <envelope>}``) of a batch's distinct embedded schemas
    (their JSON texts), merged; None if there are none, or one of them is not a Connect
    struct schema (the batch is then decoded by inference, as JSON without schemas)."""
    from pyspark.sql.types import StructField, StructType

    merged: StructType | None = None
    for text in schemas:
        schema = json.loads(text)
        if not isinstance(schema, dict) or schema.get("type") != "struct" or not schema.get("fields"):
            log.debug("an embedded schema is not a Connect struct schema: decoding by inference")
            return None
        payload = physical_type(schema, "payload")
        assert isinstance(payload, StructType)
        merged = payload if merged is None else merge(merged, payload)
    if merged is None:
        return None
    return StructType([StructField("payload", merged, True, {METADATA_KEY: {"type": "struct"}})])


def is_typed(schema: StructType) -> bool:
    """Whether ``schema`` came from :func:`envelope_type` (its payload has a Connect schema)."""
    return any(METADATA_KEY in f.metadata for f in schema.fields)


def batch_schemas(base: DataFrame, usable: Column) -> list[str]:
    """The distinct embedded schemas (JSON texts) of the ``usable`` records of ``base``
    (payloads in ``_raw``), in one small job. Records without one (JSON without schemas,
    malformed JSON) are left out: the decode tells those apart."""
    from pyspark.sql import functions as F

    schema = F.get_json_object(F.col("_raw"), "$.schema")
    rows = (base.where(usable).select(schema.alias("s")).where(F.col("s").isNotNull())
            .groupBy(F.xxhash64("s").alias("h")).agg(F.first("s").alias("s"))
            .collect())
    return [r.s for r in rows]


# -- Avro -----------------------------------------------------------------------------


def annotate_avro(spark_type: StructType, avro: Any) -> StructType:
    """``spark_type`` (the decode of Avro record schema ``avro``) with the Connect schema
    of each field Kafka Connect's Avro converters name (``connect.name``) but give no Avro
    logical type - Debezium's dates, timestamps and variable-scale decimals - so that
    :func:`to_logical` converts them as it does their JSON (bytes are bytes here already,
    and ``Decimal`` and Connect's own ``Date``/``Timestamp`` arrive as Avro logical types)."""
    named: dict[str, Mapping[str, Any]] = {}
    _collect_named(avro, named)
    return _annotated_record(spark_type, avro, named)


def _collect_named(avro: Any, named: dict[str, Mapping[str, Any]]) -> None:
    """Every named record of ``avro`` by its name and full name (a later field may refer to
    one by name: Debezium's ``after`` is ``["null", "<prefix>.Value"]``, ``before``'s type)."""
    if isinstance(avro, list):
        for branch in avro:
            _collect_named(branch, named)
    elif isinstance(avro, Mapping):
        if avro.get("type") == "record" and isinstance(avro.get("name"), str):
            name = avro["name"]
            named[name] = avro
            if avro.get("namespace"):
                named[f"{avro['namespace']}.{name}"] = avro
            for f in avro.get("fields", []):
                _collect_named(f.get("type"), named)
        for key in ("items", "values"):
            if key in avro:
                _collect_named(avro[key], named)
        if isinstance(avro.get("type"), Mapping | list):
            _collect_named(avro["type"], named)


def _avro_branch(avro: Any, named: Mapping[str, Mapping[str, Any]]) -> Any:
    """The type itself: the non-null branch of a ``[null, T]`` union, a named type's schema."""
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        avro = branches[0] if len(branches) == 1 else None
    if isinstance(avro, str):
        return named.get(avro, avro)
    if isinstance(avro, Mapping) and isinstance(avro.get("type"), Mapping | list):
        return _avro_branch(avro["type"], named)
    return avro


def _annotated_record(spark_type: StructType, avro: Any, named: Mapping[str, Mapping[str, Any]]) -> StructType:
    from pyspark.sql.types import StructField, StructType

    record = _avro_branch(avro, named)
    types = {f.get("name"): f.get("type") for f in record.get("fields", [])} if isinstance(record, Mapping) else {}
    fields = []
    for f in spark_type.fields:
        connect = _avro_connect(f.dataType, types.get(f.name), named)
        fields.append(StructField(f.name, _annotated(f.dataType, types.get(f.name), named), f.nullable,
                                  {**f.metadata, METADATA_KEY: connect} if connect else f.metadata))
    return StructType(fields)


def _annotated(data_type: DataType, avro: Any, named: Mapping[str, Mapping[str, Any]]) -> DataType:
    from pyspark.sql.types import ArrayType, StructType

    t = _avro_branch(avro, named)
    if isinstance(data_type, StructType) and isinstance(t, Mapping) and t.get("type") == "record":
        return _annotated_record(data_type, t, named)
    if isinstance(data_type, ArrayType) and isinstance(t, Mapping) and t.get("type") == "array":
        return ArrayType(_annotated(data_type.elementType, t.get("items"), named), data_type.containsNull)
    return data_type


def _avro_connect(data_type: DataType, avro: Any, named: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The Connect schema :func:`to_logical` needs for a value of Avro type ``avro``."""
    from pyspark.sql.types import ArrayType

    t = _avro_branch(avro, named)
    if not isinstance(t, Mapping):
        return None
    name = t.get("connect.name")
    if t.get("logicalType") is None and name in _AVRO_CONVERTED:
        return {"type": t.get("type"), "name": name, "binary": True}
    if isinstance(data_type, ArrayType) and t.get("type") == "array":
        items = _avro_connect(data_type.elementType, t.get("items"), named)
        return {"type": "array", "items": items} if items else None
    return None


# -- merging --------------------------------------------------------------------------


def merge(a: StructType, b: StructType) -> StructType:
    """The union of two structs' fields, in first-seen order (see the module doc)."""
    from pyspark.sql.types import StructType

    fields = list(a.fields)
    at = {f.name: i for i, f in enumerate(fields)}
    for f in b.fields:
        i = at.get(f.name)
        if i is None:
            at[f.name] = len(fields)
            fields.append(f)
        else:
            fields[i] = _merge_field(fields[i], f)
    return StructType(fields)


def _merge_field(a: StructField, b: StructField) -> StructField:
    from pyspark.sql.types import StringType, StructField, StructType

    if a.dataType == b.dataType and a.metadata == b.metadata:
        return a
    ma, mb = a.metadata.get(METADATA_KEY, {}), b.metadata.get(METADATA_KEY, {})
    if isinstance(a.dataType, StructType) and isinstance(b.dataType, StructType) \
            and ma.get("name") == mb.get("name") and ma.get("name") not in _CONVERTED:
        return StructField(a.name, merge(a.dataType, b.dataType), True, a.metadata)
    ta, tb = a.dataType.simpleString(), b.dataType.simpleString()
    if ta in _WIDENING and tb in _WIDENING and "name" not in ma and "name" not in mb:
        return b if _WIDENING.index(tb) >= _WIDENING.index(ta) else a
    if ma.get("name") == mb.get("name") == DECIMAL:  # numeric(10,2) -> numeric(12,2): the wider
        pa_, pb = (m.get("parameters") or {} for m in (ma, mb))
        if pa_.get("scale") == pb.get("scale"):
            wider = max(int(p.get("connect.decimal.precision", MAX_PRECISION)) for p in (pa_, pb))
            return StructField(a.name, a.dataType, True, {METADATA_KEY: {
                **ma, "parameters": {**pa_, "connect.decimal.precision": str(wider)}}})
    log.info("field %r is %s in one schema of the batch and %s in another: read as text", a.name, ta, tb)
    return StructField(a.name, StringType(), True, {METADATA_KEY: {"type": "string"}})


# -- logical types --------------------------------------------------------------------


def needs_conversion(field: StructField) -> bool:
    """Whether :func:`to_logical` changes values of ``field`` (else it is used as parsed)."""
    return _needs(field.dataType, field.metadata.get(METADATA_KEY))


def _needs(data_type: DataType, connect: Mapping[str, Any] | None) -> bool:
    return _anywhere(data_type, connect, lambda c: c.get("name") in _CONVERTED
                     or (c.get("type") == "bytes" and not c.get("binary")))


def _anywhere(data_type: DataType, connect: Mapping[str, Any] | None,
              here: Callable[[Mapping[str, Any]], bool]) -> bool:
    """Whether ``here`` holds for the Connect schema ``connect`` of a value of ``data_type``
    or of one inside it (a struct's fields, unless the struct is itself a named type
    converted whole; an array's items; a map's values)."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    connect = connect or {}
    if isinstance(data_type, StructType) and connect.get("name") not in _CONVERTED:
        return any(_anywhere(f.dataType, f.metadata.get(METADATA_KEY), here) for f in data_type.fields)
    if here(connect):
        return True
    if isinstance(data_type, ArrayType):
        return _anywhere(data_type.elementType, connect.get("items"), here)
    if isinstance(data_type, MapType):
        return _anywhere(data_type.valueType, connect.get("values"), here)
    return False


def to_logical(col: Column, field: StructField, where: str = "") -> Column:
    """``col`` (parsed as ``field``'s physical type) as its logical type."""
    return _convert(col, field.dataType, field.metadata.get(METADATA_KEY), where or field.name)


def _convert(col: Column, data_type: DataType, connect: Mapping[str, Any] | None, where: str) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    if not _needs(data_type, connect):
        return col
    connect = connect or {}
    name = str(connect.get("name"))
    if name == DECIMAL:
        return _decimal(F.unbase64(col), _decimal_parameters(connect, where))
    if name == VARIABLE_DECIMAL:
        value = col.getField("value")
        return _decimal_text(_digits(value if connect.get("binary") else F.unbase64(value)), col.getField("scale"))
    if name in DATES:
        return F.date_from_unix_date(col.cast("int"))
    if name in EPOCH_TIMESTAMPS:
        return _epoch_timestamp(col, EPOCH_TIMESTAMPS[name])
    if name == ZONED_TIMESTAMP:
        return _zoned_timestamp(col, where)
    if connect.get("type") == "bytes":
        return F.unbase64(col)
    if isinstance(data_type, StructType):
        members = [_convert(col.getField(f.name), f.dataType, f.metadata.get(METADATA_KEY), f"{where}.{f.name}")
                   .alias(f.name) for f in data_type.fields]
        return F.when(col.isNotNull(), F.struct(*members))
    if isinstance(data_type, ArrayType):
        items, item_type = connect.get("items"), data_type.elementType
        return F.transform(col, lambda x: _convert(x, item_type, items, f"{where}[]"))
    assert isinstance(data_type, MapType)
    values, value_type = connect.get("values"), data_type.valueType
    return F.transform_values(col, lambda _, v: _convert(v, value_type, values, f"{where}{{}}"))


def _decimal_parameters(connect: Mapping[str, Any], where: str) -> tuple[int, int]:
    params = connect.get("parameters") or {}
    where = _column_name(where)
    try:
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", MAX_PRECISION))
    except (TypeError, ValueError) as e:
        raise SourceError(f"field {where!r}: decimal parameters {params} are not numbers") from e
    if precision > MAX_PRECISION or not 0 <= scale <= precision:
        raise SourceError(
            f"field {where!r}: decimal({precision}, {scale}) does not fit Spark's and Hudi's decimals (at most "
            f"{MAX_PRECISION} digits); set the connector's decimal.handling.mode to string for this column's table")
    return precision, scale


def _column_name(where: str) -> str:
    """The table's name of the field at ``where`` (``payload.after.at`` → ``at``)."""
    return where.removeprefix("payload.").removeprefix("before.").removeprefix("after.")


def _in_before(where: str) -> bool:
    """Whether ``where`` is inside a change event's ``before`` image: only a delete takes
    its row from it, and a delete needs no more of it than the key."""
    return where.removeprefix("payload.").partition(".")[0].partition("[")[0] == "before"


def _held_timestamp(text: Column) -> Column:
    """The instant ISO-8601 ``text`` names (an offset in it), or null if it names none
    Spark's and Hudi's timestamps hold (Debezium's ``infinity``, years past 9999 or BC)."""
    from pyspark.sql import functions as F

    low, high = TIMESTAMP_MICROS
    return _let(text.try_cast("timestamp"), lambda t: F.when(F.unix_micros(t).between(low, high), t))


def _unheld(text: Column, where: str) -> Column:
    """The reason a record whose ``where`` holds ZonedTimestamp ``text`` is an error row:
    the field and its value (see :func:`value_errors`)."""
    from pyspark.sql import functions as F

    value = F.when(F.length(text) > F.lit(100), F.concat(F.substring(text, 1, 100), F.lit("..."))).otherwise(text)
    return F.format_string(f"field '{_column_name(where)}': value %s is not a timestamp Spark and Hudi hold "
                           f"({TIMESTAMP_RANGE})", value)


def _zoned_timestamp(text: Column, where: str) -> Column:
    """A ZonedTimestamp as its instant. One no timestamp holds stops the query, naming it
    (:func:`value_errors` makes its record an error row before: this is never reached),
    but in a ``before`` image, where it is null (the row is not written, or deleted)."""
    from pyspark.sql import functions as F

    if _in_before(where):
        return _held_timestamp(text)
    return _let(_held_timestamp(text), lambda t: F.when(text.isNull() | t.isNotNull(), t).otherwise(
        F.raise_error(_unheld(text, where)).cast("timestamp")))


def value_errors(parsed: Column, schema: StructType) -> Column | None:
    """Why a record parsed as ``schema`` (:func:`envelope_type`'s) holds a value its column's
    type cannot: a ZonedTimestamp (``timestamptz``) of ``infinity``, or of a year before 1 or
    after 9999, which Postgres takes and Spark's and Hudi's timestamps do not. Each such
    field with its value, ``; ``-separated, or null; None if no field of ``schema`` may have
    one. A decode makes such a record an error row with this reason, never a null; values
    in a ``before`` image are left out (see :func:`_zoned_timestamp`)."""
    reasons = _value_errors(parsed, schema, None, "")
    return _joined(reasons) if reasons else None


def _joined(reasons: list[Column]) -> Column:
    from pyspark.sql import functions as F

    return F.nullif(F.concat_ws("; ", *reasons), F.lit(""))


def _value_errors(col: Column, data_type: DataType, connect: Mapping[str, Any] | None, where: str) -> list[Column]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StructType

    if not _may_be_unheld(data_type, connect) or _in_before(where):
        return []
    connect = connect or {}
    if connect.get("name") == ZONED_TIMESTAMP:
        return [F.when(col.isNotNull() & _held_timestamp(col).isNull(), _unheld(col, where))]
    if isinstance(data_type, StructType):
        return [r for f in data_type.fields for r in _value_errors(
            col.getField(f.name), f.dataType, f.metadata.get(METADATA_KEY), f"{where}.{f.name}" if where else f.name)]
    if isinstance(data_type, ArrayType):
        items, item_type = connect.get("items"), data_type.elementType
    else:
        assert isinstance(data_type, MapType)
        col, items, item_type = F.map_values(col), connect.get("values"), data_type.valueType
    # the first element's reason (an array of them would name each)
    reasons = F.transform(col, lambda x: _joined(_value_errors(x, item_type, items, f"{where}[]")))
    return [F.try_element_at(F.filter(reasons, lambda r: r.isNotNull()), F.lit(1))]


def _may_be_unheld(data_type: DataType, connect: Mapping[str, Any] | None) -> bool:
    """Whether a value of ``data_type`` may hold one :func:`value_errors` refuses."""
    return _anywhere(data_type, connect, lambda c: c.get("name") == ZONED_TIMESTAMP)


def _epoch_timestamp(col: Column, per_second: int) -> Column:
    from pyspark.sql import functions as F

    count = col.cast("bigint")
    if per_second == 1_000:
        return F.timestamp_millis(count)
    if per_second == 1_000_000:
        return F.timestamp_micros(count)
    # nanoseconds to whole microseconds, rounded down (exact integer division)
    micros = F.call_function("div", count - F.pmod(count, F.lit(1000)), F.lit(1000))
    return F.timestamp_micros(micros)


#: :func:`_digits` reads a number 7 bytes at a time (56 bits: one ``bigint`` from ``conv``)
#: into limbs of 18 decimal digits (a limb times 2^56 plus a carry fits ``decimal(38,0)``).
_CHUNK_HEX = 14
_LIMB_DIGITS = 18


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body(value)`` with ``value`` evaluated once: the argument of a lambda (an
    expression used twice in ``body`` would otherwise be written, and run, twice)."""
    from pyspark.sql import functions as F

    return F.transform(F.array(value), body)[0]


def _digits(b: Column) -> Column:
    """A big-endian two's-complement integer of any length (Connect's decimal value, Java's
    ``BigInteger.toByteArray``) as ``struct(negative, digits)``: its sign and the decimal
    digits of its size, exact (null for no bytes). A negative number's size is its bits
    inverted plus one: its hex digits are inverted and the one added to the last chunk."""
    from pyspark.sql import functions as F

    def signed(h: Column) -> Column:
        negative = F.substring(h, 1, 1) >= F.lit("8")  # in hex's own order: 0-7 < 8-9 < A-F
        bits = F.when(negative, F.translate(h, "0123456789ABCDEF", "FEDCBA9876543210")).otherwise(h)
        return _let(F.struct(negative.alias("negative"), bits.alias("bits")), lambda n: F.struct(
            n["negative"].alias("negative"), _limb_text(_limbs(n["bits"], n["negative"])).alias("digits")))

    return _let(F.hex(b), lambda h: F.when(F.length(h) > F.lit(0), signed(h)))


def _limbs(bits: Column, plus_one: Column) -> Column:
    """The unsigned value of hex digits ``bits`` (plus one if ``plus_one``) as base-10^18
    limbs, least significant first: folded 56 bits at a time, each step multiplying the
    limbs by 2^56 and carrying through them (no partial value exceeds a limb × 2^56)."""
    from pyspark.sql import functions as F

    width = F.lit(_CHUNK_HEX)
    count = F.call_function("div", F.length(bits) + width - F.lit(1), width).cast("int")
    base = F.lit(10**_LIMB_DIGITS).cast(f"decimal({_LIMB_DIGITS + 1},0)")

    def chunks(padded: Column) -> Column:
        def chunk(j: Column) -> Column:
            value = F.conv(F.substring(padded, j * width + F.lit(1), width), 16, 10).cast("bigint")
            return value + F.when(plus_one & (j == count - F.lit(1)), F.lit(1)).otherwise(F.lit(0)).cast("bigint")

        return F.transform(F.sequence(F.lit(0), count - F.lit(1)), chunk)

    def shifted(limbs: Column, c: Column) -> Column:  # limbs × 2^56 + c
        def carry_through(acc: Column, limb: Column) -> Column:
            v = limb.cast("decimal(38,0)") * F.lit(1 << (4 * _CHUNK_HEX)) + acc["carry"]
            return F.struct(F.array_append(acc["out"], F.pmod(v, base).cast("bigint")).alias("out"),
                            F.call_function("div", v, base).cast("bigint").alias("carry"))

        start = F.struct(F.array().cast("array<bigint>").alias("out"), c.alias("carry"))
        return F.aggregate(limbs, start, carry_through, lambda done: F.when(
            done["carry"] > F.lit(0), F.array_append(done["out"], done["carry"])).otherwise(done["out"]))

    return F.aggregate(_let(F.lpad(bits, count * width, "0"), chunks), F.array().cast("array<bigint>"), shifted)


def _limb_text(limbs: Column) -> Column:
    """The decimal digits of :func:`_limbs`' value (``0`` for none)."""
    from pyspark.sql import functions as F

    def text(ls: Column) -> Column:
        parts = F.transform(F.reverse(ls), lambda limb, i: F.when(i == F.lit(0), limb.cast("string")).otherwise(
            F.lpad(limb.cast("string"), _LIMB_DIGITS, "0")))
        return F.when(F.size(ls) == F.lit(0), F.lit("0")).otherwise(F.array_join(parts, ""))

    return _let(limbs, text)


def _decimal_text(number: Column, scale: Column) -> Column:
    """The decimal text of ``number`` (:func:`_digits`) × 10^-``scale`` (``-12345``, 2 →
    ``-123.45``; 5, -2 → ``500``); ``number`` is read once (a lambda's argument)."""
    from pyspark.sql import functions as F

    def text(n: Column) -> Column:
        digits = n["digits"]
        padded = F.lpad(digits, F.greatest(F.length(digits), scale + F.lit(1)).cast("int"), "0")
        whole = F.substring(padded, F.lit(1), F.length(padded) - scale)
        fraction = F.substring(padded, F.length(padded) - scale + F.lit(1), scale)
        sign = F.when(n["negative"], F.lit("-")).otherwise(F.lit(""))
        zeros = F.when(digits == F.lit("0"), F.lit("")).otherwise(F.repeat(F.lit("0"), -scale))
        return (F.when(n.isNull(), F.lit(None).cast("string"))
                .when(scale > F.lit(0), F.concat(sign, whole, F.lit("."), fraction))
                .when(scale < F.lit(0), F.concat(sign, digits, zeros))
                .otherwise(F.concat(sign, digits)))

    return F.transform(F.array(number), text)[0]


def _decimal(b: Column, parameters: tuple[int, int]) -> Column:
    from pyspark.sql import functions as F

    precision, scale = parameters
    return _decimal_text(_digits(b), F.lit(scale)).cast(f"decimal({precision},{scale})")

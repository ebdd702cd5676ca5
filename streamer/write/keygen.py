"""Record keys and partition paths, built column-wise exactly as Hudi's key generators do.

Hudi readers (and the bloom index of any Hudi writer) look records up by the string in
``_hoodie_record_key`` and find partitions by the folder name, so both must match what
the Java key generators would produce for the same row, byte for byte:

* simple: the field's value; complex: ``f1:v1,f2:v2`` (``__null__``/``__empty__`` for
  null/empty parts); non-partitioned: simple key (complex form for several fields);
* partition path: values joined by ``/``, ``field=value`` when hive-style, and
  ``__HIVE_DEFAULT_PARTITION__`` for a null or empty value;
* timestamp-based: the partition is the timestamp field formatted with a Java-style
  pattern (``yyyy/MM/dd``, ``yyyy-MM-dd-HH``...) from epoch millis, seconds or a string.

Everything is a :mod:`pyarrow.compute` expression over whole columns: keys are built for
millions of rows per batch and a per-row Python loop would dominate the write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from streamer.errors import SchemaError
from streamer.table import meta_fields
from streamer.table.identity import KeyGenType, TableConfig, TimestampType
from streamer.table.naming import escape_path_names

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_KEY_PART = "__null__"
EMPTY_KEY_PART = "__empty__"

RECORD_KEY_COL = meta_fields.RECORD_KEY
PARTITION_PATH_COL = meta_fields.PARTITION_PATH


@dataclass(frozen=True)
class Keys:
    """The two key columns for a batch, aligned with its rows."""

    record_keys: pa.Array  # string, never null
    partition_paths: pa.Array  # string, never null ('' when non-partitioned)


def _column(table: pa.Table, name: str) -> pa.Array:
    if name not in table.column_names:
        raise SchemaError(f"field {name!r} (record key/partition field) is missing from the batch")
    col = table.column(name)
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def value_to_string(arr: pa.Array, field_name: str) -> pa.Array:
    """Render values the way Hudi's ``toString`` of the Avro value does.

    Integers and strings as is, booleans ``true``/``false``, dates ISO (Hudi converts
    the logical date), timestamps as their raw long (Hudi keeps the Avro long unless
    consistent logical timestamps are on), floats with a trailing ``.0`` when integral
    (Java's ``Double.toString``).
    """
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.cast(t.value_type)
        t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return arr.cast(pa.string())
    if pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_duration(t):
        return arr.cast(pa.int64()).cast(pa.string())
    if pa.types.is_floating(t):
        s = arr.cast(pa.string())
        needs_dot = pc.invert(pc.match_substring_regex(s, r"[.eEnN]"))
        return pc.if_else(needs_dot, pc.binary_join_element_wise(s, ".0", ""), s)
    if (
        pa.types.is_integer(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_decimal(t)
    ):
        return arr.cast(pa.string())
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        try:
            return arr.cast(pa.string())
        except pa.ArrowInvalid as e:  # Hudi's keys are text: bytes that are none have no key
            raise SchemaError(
                f"field {field_name!r}: a binary value that is not UTF-8 text cannot be a record key or partition "
                "value (key by another field; for Debezium, binary.handling.mode=hex or base64 sends text)") from e
    raise SchemaError(f"field {field_name!r} of type {t} cannot be a record key or partition field")


def _null_or_empty(s: pa.Array) -> pa.Array:
    return pc.fill_null(pc.equal(pc.utf8_length(s), 0), True)


def _never_empty(t: pa.DataType) -> bool:
    """Types whose every non-null value renders as a non-empty string."""
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_date(t) or pa.types.is_decimal(t) or pa.types.is_timestamp(t)
            or pa.types.is_time(t) or pa.types.is_duration(t))


# --------------------------------------------------------------------------- record keys
def _simple_record_key(table: pa.Table, name: str) -> pa.Array:
    col = _column(table, name)
    s = value_to_string(col, name)
    if _never_empty(col.type) and not s.null_count:
        return s  # numbers, dates, times render non-empty: only a null could be bad
    bad = _null_or_empty(s)
    if pc.any(bad).as_py():
        row = pc.index(bad, True).as_py()
        raise SchemaError(
            f"record key field {name!r} is null or empty (row {row}); Hudi keys cannot be empty"
        )
    return s


def _complex_record_key(table: pa.Table, names: tuple[str, ...]) -> pa.Array:
    parts = []
    all_bad = None
    for name in names:
        s = value_to_string(_column(table, name), name)
        is_null = pc.is_null(s)
        is_empty = pc.fill_null(pc.equal(pc.utf8_length(s), 0), False)
        bad = pc.or_(is_null, is_empty)
        all_bad = bad if all_bad is None else pc.and_(all_bad, bad)
        value = pc.if_else(is_null, NULL_KEY_PART, pc.if_else(is_empty, EMPTY_KEY_PART, s))
        parts.append(pc.binary_join_element_wise(f"{name}:", value, ""))
    if all_bad is not None and pc.any(all_bad).as_py():
        row = pc.index(all_bad, True).as_py()
        raise SchemaError(
            f"record key fields {list(names)} are all null or empty (row {row}); "
            "Hudi keys cannot be empty"
        )
    return pc.binary_join_element_wise(*parts, ",")


def record_keys(table: pa.Table, cfg: TableConfig) -> pa.Array:
    fields = cfg.record_key_fields
    if cfg.keygen is KeyGenType.COMPLEX or len(fields) > 1:
        return _complex_record_key(table, fields)
    return _simple_record_key(table, fields[0])


# --------------------------------------------------------------------------- partitions
def _partition_part(s: pa.Array, name: str, hive: bool, url_encode: bool = False) -> pa.Array:
    """One field's path segment, in Hudi's order: default for null/empty, then the
    value escaped (``hoodie.datasource.write.partitionpath.urlencode``), then ``name=``."""
    bad = _null_or_empty(s)
    value = pc.if_else(bad, DEFAULT_PARTITION, s) if pc.any(bad).as_py() else s
    if url_encode:
        value = escape_path_names(value)
    return pc.binary_join_element_wise(f"{name}=", value, "") if hive else value


_JAVA_TO_STRFTIME = [
    ("yyyy", "%Y"),
    ("yy", "%y"),
    ("MM", "%m"),
    ("dd", "%d"),
    ("HH", "%H"),
    ("mm", "%M"),
    ("ss", "%S"),
]


def java_to_strftime(pattern: str) -> str:
    """Translate the subset of Java ``SimpleDateFormat`` that partition formats use."""
    out = pattern.replace("'", "")
    for java, c in _JAVA_TO_STRFTIME:
        out = out.replace(java, c)
    if re.search(r"[a-zA-Z]", re.sub(r"%[a-zA-Z]", "", out)):
        raise SchemaError(f"date format {pattern!r} uses letters we do not support")
    return out


def _timestamp_partition(table: pa.Table, cfg: TableConfig) -> pa.Array:
    name = cfg.partition_fields[0]
    ts_cfg = cfg.timestamp
    col = _column(table, name)
    if ts_cfg.timestamp_type is TimestampType.DATE_STRING:
        ts = pc.strptime(
            col.cast(pa.string()), format=java_to_strftime(ts_cfg.input_format), unit="ms"
        )
    elif pa.types.is_timestamp(col.type):
        ts = col.cast(pa.timestamp("ms", tz=None)) if col.type.tz else col.cast(pa.timestamp("ms"))
    else:
        if not pa.types.is_integer(col.type):
            raise SchemaError(
                f"timestamp partition field {name!r} must be an integer epoch, got {col.type}"
            )
        millis = col.cast(pa.int64())
        if ts_cfg.timestamp_type is TimestampType.UNIX_TIMESTAMP:
            millis = pc.multiply(millis, 1000)
        ts = millis.cast(pa.timestamp("ms"))
    ts = ts.cast(pa.timestamp("ms", tz=ts_cfg.timezone or "UTC"))
    s = pc.strftime(ts, format=java_to_strftime(ts_cfg.output_format))
    return _partition_part(s, name, cfg.hive_style_partitioning, cfg.url_encode_partitions)


def partition_paths(table: pa.Table, cfg: TableConfig) -> pa.Array:
    n = table.num_rows
    if cfg.keygen is KeyGenType.NON_PARTITIONED or not cfg.partition_fields:
        return pc.fill_null(pa.nulls(n, pa.string()), "")
    if cfg.keygen is KeyGenType.TIMESTAMP:
        return _timestamp_partition(table, cfg)
    parts = [
        _partition_part(value_to_string(_column(table, f), f), f, cfg.hive_style_partitioning,
                        cfg.url_encode_partitions)
        for f in cfg.partition_fields
    ]
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, "/")


def partition_value_column(cfg: TableConfig, schema: pa.Schema) -> str | None:
    """The data column whose value on every row is the row's partition path, if there is
    one: the one partition field of a simple or complex key generator, a ``string``,
    neither Hive-style (``name=value``) nor URL-encoded. Not in the default partition,
    where null and empty values both land (see :func:`_partition_part`); and never with a
    global index, which may write an update where its key is stored, under another
    partition than its value names (``streamer.write.moves``)."""
    if cfg.keygen in (KeyGenType.NON_PARTITIONED, KeyGenType.TIMESTAMP) or len(cfg.partition_fields) != 1:
        return None
    if cfg.index.is_global:
        return None
    name = cfg.partition_fields[0]
    if cfg.hive_style_partitioning or cfg.url_encode_partitions or name not in schema.names:
        return None
    return name if schema.field(name).type == pa.string() else None


def build_keys(table: pa.Table, cfg: TableConfig) -> Keys:
    """Both key columns for ``table`` (raises :class:`SchemaError` naming the field)."""
    return Keys(record_keys(table, cfg), partition_paths(table, cfg))

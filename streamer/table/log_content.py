"""Content codecs of Hudi log blocks: Avro data, Parquet data, delete lists.

The framing (magic, lengths, headers) is in :mod:`streamer.table.log_format`; this module
only turns a block's content bytes into Arrow and back. Observed in the fixtures (Hudi
0.14-1.x all agree):

* Avro data content: ``int32 version (3)``, ``int32 record count``, then per record
  ``int32 length`` + the record's Avro binary encoding under the header's SCHEMA.
  Version 1 had no record count.
* Parquet data content: a whole Parquet file (Hudi writes it GZIP-compressed, the
  ``hoodie.parquet.compression.codec`` default).
* Delete content: ``int32 version (3)``, ``int32 length``, then an Avro-binary
  ``HoodieDeleteRecordList``: an array of {recordKey, partitionPath, orderingVal}, where
  orderingVal is a union of null and single-field "wrapper" records (BooleanWrapper,
  IntWrapper, ...). Versions 1-2 were Java/Kryo-serialized and are not readable here.
  A Hudi delete without an ordering value carries ``IntWrapper(0)`` (Hudi's default
  ordering value, meaning "natural/commit-time order"); we write the same.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import struct
from collections.abc import Mapping
from typing import Any, cast

import fastavro
import pyarrow as pa
import pyarrow.compute as pc

from streamer import defaults
from streamer.errors import SchemaError
from streamer.table import meta_fields
from streamer.table.avro_schema import as_record, avro_records_to_arrow, avro_to_arrow
from streamer.table.base_file import parquet_bytes

AVRO_BLOCK_VERSION = 3
DELETE_BLOCK_VERSION = 3
RECORD_KEY = meta_fields.RECORD_KEY
PARTITION_PATH = meta_fields.PARTITION_PATH
ORDERING_VALUE = "ordering_value"

_NS = "org.apache.hudi.avro.model"


def _wrapper(name: str, typ: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": _NS, "fields": [{"name": "value", "type": typ}]}


#: (wrapper name, Avro value type, Arrow type) in Hudi's union order (after "null").
_WRAPPERS: list[tuple[str, Any, pa.DataType]] = [
    ("BooleanWrapper", "boolean", pa.bool_()),
    ("IntWrapper", "int", pa.int32()),
    ("LongWrapper", "long", pa.int64()),
    ("FloatWrapper", "float", pa.float32()),
    ("DoubleWrapper", "double", pa.float64()),
    ("BytesWrapper", "bytes", pa.binary()),
    ("StringWrapper", "string", pa.string()),
    ("DateWrapper", "int", pa.date32()),
    ("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}, pa.decimal128(30, 15)),
    ("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}, pa.time64("us")),
    ("TimestampMicrosWrapper", "long", pa.timestamp("us", tz="UTC")),
]
_WRAPPER_ARROW = {f"{_NS}.{n}": t for n, _, t in _WRAPPERS}

DELETE_LIST_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "HoodieDeleteRecordList",
        "namespace": _NS,
        "fields": [
            {
                "name": "deleteRecordList",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieDeleteRecord",
                        "fields": [
                            {"name": "recordKey", "type": ["null", "string"], "default": None},
                            {"name": "partitionPath", "type": ["null", "string"], "default": None},
                            {
                                "name": "orderingVal",
                                "type": ["null"] + [_wrapper(n, t) for n, t, _ in _WRAPPERS],
                                "default": None,
                            },
                        ],
                    },
                },
            }
        ],
    }
)


# -- Avro data --------------------------------------------------------------------------------
def _container_prefix(schema: Any) -> tuple[bytes, bytes]:
    """Header bytes and sync marker of an empty Avro container file for ``schema``."""
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [], codec="null", sync_marker=b"\x00" * 16)
    return buf.getvalue(), b"\x00" * 16


def _zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def split_avro_records(content: bytes, where: str) -> list[memoryview]:
    """The raw Avro datums of an Avro data block, validated against the content length."""
    if len(content) < 4:
        raise SchemaError(f"{where}: Avro block content too short ({len(content)} bytes)")
    (version,) = struct.unpack_from(">i", content, 0)
    pos = 4
    count = None
    if version >= 2:
        (count,) = struct.unpack_from(">i", content, pos)
        pos += 4
        if count < 0:
            raise SchemaError(f"{where}: negative record count {count}")
    view = memoryview(content)
    out: list[memoryview] = []
    while pos < len(content) and (count is None or len(out) < count):
        if pos + 4 > len(content):
            raise SchemaError(f"{where}: record length runs past block content at {pos}")
        (n,) = struct.unpack_from(">i", content, pos)
        pos += 4
        if n < 0 or pos + n > len(content):
            raise SchemaError(f"{where}: record {len(out)} length {n} past block content")
        out.append(view[pos : pos + n])
        pos += n
    if count is not None and len(out) != count:
        raise SchemaError(f"{where}: expected {count} records, found {len(out)}")
    return out


def decode_avro_records(
    content: bytes, writer_schema: Mapping[str, Any], columns: list[str] | None, where: str
) -> pa.Table:
    """Arrow table of an Avro data block, optionally projected to ``columns``.

    All datums are decoded in one C-level pass: they are exactly the payload of an Avro
    container block, so we prepend a container header and let fastavro's reader run.
    Projection uses Avro schema resolution, so skipped fields are never materialised.
    """
    datums = split_avro_records(content, where)
    arrow_schema = avro_to_arrow(dict(writer_schema))
    reader_schema: dict[str, Any] | None = None
    if columns is not None:
        missing = [c for c in columns if c not in arrow_schema.names]
        if missing:
            raise SchemaError(f"{where}: columns {missing} not in the block schema")
        fields = {f["name"]: f for f in writer_schema["fields"]}
        reader_schema = {**writer_schema, "fields": [fields[c] for c in columns]}
        arrow_schema = pa.schema([arrow_schema.field(c) for c in columns])
    if not datums:
        return arrow_schema.empty_table()
    header, sync = _container_prefix(dict(writer_schema))
    payload = b"".join(datums)
    blob = b"".join([header, _zigzag_varint(len(datums)), _zigzag_varint(len(payload)), payload, sync])
    try:
        records = list(fastavro.reader(io.BytesIO(blob), reader_schema=reader_schema))
    except Exception as e:  # fastavro raises assorted errors on malformed datums
        raise SchemaError(f"{where}: undecodable Avro records: {e}") from e
    # fastavro types each as any Avro value; with a record reader schema each is a dict
    return avro_records_to_arrow(cast(list[dict[str, Any]], records), arrow_schema)


def encode_avro_records(table: pa.Table, avro_schema: Mapping[str, Any]) -> bytes:
    """Avro data block content for ``table`` (Hudi layout, version 3)."""
    parsed = fastavro.parse_schema(dict(avro_schema))
    out = io.BytesIO()
    out.write(struct.pack(">ii", AVRO_BLOCK_VERSION, table.num_rows))
    buf = io.BytesIO()
    for rec in table.to_pylist():
        buf.seek(0)
        buf.truncate()
        fastavro.schemaless_writer(buf, parsed, _maps_as_dicts(rec))
        data = buf.getvalue()
        out.write(struct.pack(">i", len(data)))
        out.write(data)
    return out.getvalue()


def _maps_as_dicts(v: Any) -> Any:
    """Arrow gives maps as lists of (key, value) tuples; Avro wants dicts."""
    if isinstance(v, dict):
        return {k: _maps_as_dicts(x) for k, x in v.items()}
    if isinstance(v, list):
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
            return {k: _maps_as_dicts(x) for k, x in v}
        return [_maps_as_dicts(x) for x in v]
    return v


# -- Parquet data -----------------------------------------------------------------------------
def encode_parquet_content(table: pa.Table, kv_metadata: Mapping[str, str], *,
                           codec: str = defaults.PARQUET_CODEC) -> bytes:
    """A Parquet data block's content: a whole Parquet file with ``kv_metadata`` in its
    footer, without column statistics (see :func:`streamer.table.base_file.parquet_bytes`)."""
    return parquet_bytes(table, kv_metadata, codec=codec, statistics=False)


def sort_by_record_key(table: pa.Table) -> pa.Table:
    if RECORD_KEY not in table.column_names:
        raise SchemaError(f"data block needs a {RECORD_KEY} column")
    return table.take(pc.sort_indices(table, [(RECORD_KEY, "ascending")]))


# -- deletes ----------------------------------------------------------------------------------
def decode_deletes(content: bytes, where: str) -> pa.Table:
    if len(content) < 8:
        raise SchemaError(f"{where}: delete block content too short ({len(content)} bytes)")
    version, length = struct.unpack_from(">ii", content, 0)
    if version < 3:
        raise SchemaError(f"{where}: delete block version {version} is Java-serialized; unsupported")
    if length < 0 or 8 + length > len(content):
        raise SchemaError(f"{where}: delete payload length {length} past block content")
    try:
        decoded = fastavro.schemaless_reader(
            io.BytesIO(content[8 : 8 + length]), DELETE_LIST_SCHEMA, None, return_record_name=True
        )
    except Exception as e:
        raise SchemaError(f"{where}: undecodable delete list: {e}") from e
    decoded = as_record(decoded, f"{where}: delete list")
    recs = decoded["deleteRecordList"]
    keys = [r["recordKey"] for r in recs]
    parts = [r["partitionPath"] for r in recs]
    ordering = [r["orderingVal"] for r in recs]
    return pa.table(
        {RECORD_KEY: pa.array(keys, pa.string()), PARTITION_PATH: pa.array(parts, pa.string()),
         ORDERING_VALUE: _ordering_to_arrow(ordering)}
    )


def _ordering_to_arrow(vals: list[Any]) -> pa.Array:
    """Unwrap (wrapper name, {"value": v}) into the most faithful single Arrow type."""
    kinds = {v[0] for v in vals if v is not None}
    raw = [None if v is None else v[1]["value"] for v in vals]
    if not kinds:
        return pa.nulls(len(vals), pa.null())
    if len(kinds) == 1:
        kind = kinds.pop()
        typ = _WRAPPER_ARROW[kind]
        if kind.endswith("TimestampMicrosWrapper"):
            return pa.array(raw, pa.int64()).cast(typ)
        if kind.endswith("DateWrapper"):
            return pa.array(raw, pa.int32()).cast(typ)
        if kind.endswith("TimeMicrosWrapper"):
            raw = [_time_to_micros(x) for x in raw]
            return pa.array(raw, pa.int64()).cast(typ)
        return pa.array(raw, typ)
    short = {k.rsplit(".", 1)[1] for k in kinds}
    if short <= {"IntWrapper", "LongWrapper"}:
        return pa.array(raw, pa.int64())
    if short <= {"IntWrapper", "LongWrapper", "FloatWrapper", "DoubleWrapper"}:
        return pa.array([None if x is None else float(x) for x in raw], pa.float64())
    return pa.array([None if x is None else str(x) for x in raw], pa.string())


def _time_to_micros(x: Any) -> int | None:
    if isinstance(x, dt.time):
        return ((x.hour * 60 + x.minute) * 60 + x.second) * 1_000_000 + x.microsecond
    return x


def encode_deletes(keys_table: pa.Table) -> bytes:
    """Delete block content (version 3) for a table of keys and optional ordering values."""
    for col in (RECORD_KEY, PARTITION_PATH):
        if col not in keys_table.column_names:
            raise SchemaError(f"delete block needs a {col} column")
    keys = keys_table.column(RECORD_KEY).to_pylist()
    parts = keys_table.column(PARTITION_PATH).to_pylist()
    if ORDERING_VALUE in keys_table.column_names:
        ordering = _wrap_ordering(keys_table.column(ORDERING_VALUE))
    else:
        ordering = [(f"{_NS}.IntWrapper", {"value": 0})] * len(keys)
    recs = [
        {"recordKey": k, "partitionPath": p, "orderingVal": o}
        for k, p, o in zip(keys, parts, ordering, strict=True)
    ]
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, DELETE_LIST_SCHEMA, {"deleteRecordList": recs})
    payload = buf.getvalue()
    return struct.pack(">ii", DELETE_BLOCK_VERSION, len(payload)) + payload


def _decimal_ordering(values: list[Any]) -> list[Any]:
    """Decimals as Hudi's DecimalWrapper holds them: decimal(30, 15); a value with more
    than 15 integer digits does not fit and is refused rather than rounded."""
    q = decimal.Decimal(1).scaleb(-15)
    limit = decimal.Decimal(10) ** 15
    out: list[decimal.Decimal | None] = []
    with decimal.localcontext(decimal.Context(prec=80)):
        for x in values:
            if x is None:
                out.append(None)
                continue
            if abs(x) >= limit:
                raise SchemaError(
                    f"delete ordering value {x} does not fit Hudi's DecimalWrapper (decimal(30, 15))"
                )
            out.append(x.quantize(q))
    return out


def _wrap_ordering(col: pa.ChunkedArray) -> list[Any]:
    t = col.type
    if pa.types.is_null(t):
        return [(f"{_NS}.IntWrapper", {"value": 0})] * len(col)
    if pa.types.is_timestamp(t):
        vals = col.cast(pa.timestamp("us", tz=t.tz)).cast(pa.int64()).to_pylist()
        name = "TimestampMicrosWrapper"
    elif pa.types.is_date(t):
        vals, name = col.cast(pa.date32()).cast(pa.int32()).to_pylist(), "DateWrapper"
    elif pa.types.is_time(t):
        vals, name = col.cast(pa.time64("us")).cast(pa.int64()).to_pylist(), "TimeMicrosWrapper"
    elif pa.types.is_decimal(t):
        vals, name = _decimal_ordering(col.to_pylist()), "DecimalWrapper"
    elif pa.types.is_boolean(t):
        vals, name = col.to_pylist(), "BooleanWrapper"
    elif pa.types.is_integer(t):
        wide = t.bit_width == 64 or (t.bit_width == 32 and pa.types.is_unsigned_integer(t))
        vals, name = col.to_pylist(), "LongWrapper" if wide else "IntWrapper"
        if t == pa.uint64() and any(v is not None and v >= 1 << 63 for v in vals):
            raise SchemaError(
                f"delete ordering value {max(v for v in vals if v is not None)} does not fit Hudi's "
                "LongWrapper (a signed 64-bit long)"
            )
    elif pa.types.is_floating(t):
        vals, name = col.to_pylist(), "DoubleWrapper" if t.bit_width == 64 else "FloatWrapper"
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        vals, name = col.to_pylist(), "BytesWrapper"
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        vals, name = col.to_pylist(), "StringWrapper"
    else:
        raise SchemaError(f"delete ordering value of type {t} has no Hudi wrapper")
    full = f"{_NS}.{name}"
    return [None if v is None else (full, {"value": v}) for v in vals]


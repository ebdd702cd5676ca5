"""A clean Kafka JSON batch decoded on the driver: Spark reads the bytes, Arrow parses them.

Why: on the local engine a micro-batch's rows are collected to the driver anyway, and
Spark's ``from_json`` is most of its JVM work (it runs outside whole-stage code
generation, a row at a time); the ceiling it is measured against pays the same decode
and then a Parquet write (benchmarks/RESULTS.md). Collecting the raw records
and parsing them with Arrow's multi-threaded JSON reader halves the batch's JVM time.

Spark stays the definition of a record's value: the driver only decodes a batch in
which **every** record is ordinary - a UTF-8 JSON object on one line, within
``max_record_bytes``, no lone-surrogate escape, its declared fields of the types Arrow
parses exactly as Spark does (strings, 32/64-bit integers, doubles, booleans) - and only
if Arrow's reader accepts every one of them with the declared types. Anything else
(a tombstone, a malformed or mistyped record, a single-quoted one Spark would accept)
returns None and the batch goes through Spark's decode as before, with its error rows
and their reasons; ``tests/unit/sources/test_kafka_driver_json.py`` holds the two
decoders to the same rows on a corpus of such records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

#: Raw Kafka columns collected: the payload and what the metadata columns are made of.
RAW_COLUMNS = ("topic", "partition", "offset", "timestamp", "value")
#: A record the driver leaves to Spark: a line break inside it (the reader splits lines
#: there), or an escaped UTF-16 surrogate (Spark keeps a lone one as U+FFFD, Arrow refuses
#: or pairs it differently).
_UNUSUAL = r"[\n\r]|\\u[dD][89a-fA-F]"
#: JSON's insignificant whitespace (RFC 8259).
JSON_WHITESPACE = " \t\r\n"
#: Arrow's reader needs a whole record inside one block.
_MIN_BLOCK = 1 << 20


def arrow_fields(schema: StructType) -> list[pa.Field] | None:
    """The declared schema's fields as Arrow types the driver decodes exactly as Spark's
    ``from_json`` does, or None if one of its types is left to Spark (timestamps and dates
    follow Spark's formats and time zone, decimals its rounding, floats its float parse,
    nested types its conversions of mismatched values)."""
    from pyspark.sql.types import BooleanType, DoubleType, IntegerType, LongType, StringType

    simple = {StringType: pa.string(), LongType: pa.int64(), IntegerType: pa.int32(),
              DoubleType: pa.float64(), BooleanType: pa.bool_()}
    fields = []
    for f in schema.fields:
        typ = simple.get(type(f.dataType))
        if typ is None:
            return None
        fields.append(pa.field(f.name, typ))
    if len({f.name for f in fields}) != len(fields):
        return None
    return fields


def collect_raw(raw: DataFrame) -> pa.Table:
    """The batch's raw records, as Spark's Arrow collect types them (one Spark job)."""
    return raw.select(*RAW_COLUMNS).toArrow()


def decode(
    raw: pa.Table, fields: list[pa.Field], metadata: dict[str, str], max_record_bytes: int | None
) -> pa.Table | None:
    """The good rows of ``raw`` (declared ``fields``, then ``metadata``: column name →
    raw column) typed as Spark's collect types them, or None if a record is not ordinary
    (see the module docstring): the caller then decodes the batch with Spark."""
    values = raw.column("value").combine_chunks()
    n = len(values)
    if n == 0 or values.null_count:
        return None
    try:
        text = values.cast(pa.string())  # validates UTF-8
    except pa.ArrowInvalid:
        return None
    lengths = pc.binary_length(values)
    longest = pc.max(lengths).as_py()
    if max_record_bytes is not None and longest > max_record_bytes:
        return None
    # one JSON object per record: Arrow's reader crashes the process on a bare top-level
    # ``null`` and skips blank lines, so anything but ``{...}`` is left to Spark
    trimmed = pc.utf8_trim(text, JSON_WHITESPACE)
    if not (pc.all(pc.starts_with(trimmed, "{")).as_py() and pc.all(pc.ends_with(trimmed, "}")).as_py()):
        return None
    if pc.any(pc.match_substring_regex(text, _UNUSUAL)).as_py():
        return None
    # each record and a line break, one buffer: the reader's newline-delimited input
    lines = pc.binary_join_element_wise(values, pa.scalar(b"", values.type), pa.scalar(b"\n", values.type))
    width = pa.int64() if pa.types.is_large_binary(lines.type) else pa.int32()
    offsets = pa.Array.from_buffers(width, n + 1, [None, lines.buffers()[1]], offset=lines.offset)
    first, last = offsets[0].as_py(), offsets[n].as_py()
    data = lines.buffers()[2].slice(first, last - first)
    block = max(_MIN_BLOCK, 1 << int(longest + 2).bit_length())
    try:
        parsed = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(block_size=block),
            parse_options=pj.ParseOptions(explicit_schema=pa.schema(fields), unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if parsed.num_rows != n:
        return None  # a line held more than one value: Spark's verdict decides
    string = raw.schema.field("topic").type  # the collect's string type
    columns, out = [], []
    for f in fields:
        column = parsed.column(f.name)
        typ = string if pa.types.is_string(f.type) else f.type
        columns.append(column.cast(typ))
        out.append(pa.field(f.name, typ, nullable=True))
    for name, source in metadata.items():
        columns.append(raw.column(source))
        out.append(raw.schema.field(source).with_name(name))
    return pa.Table.from_arrays(columns, schema=pa.schema(out))

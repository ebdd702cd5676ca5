"""Hudi base files: Parquet with the meta columns and the bloom/range footer.

What Hudi puts in a base file footer (every fixture agrees): ``org.apache.hudi.bloomfilter``
(base64 DYNAMIC_V0), ``hoodie_bloom_filter_type_code``, ``hoodie_min_record_key``,
``hoodie_max_record_key``; plus ``parquet.avro.schema`` and ``writer.model.name=avro`` when
the Avro writer wrote it (the Spark row writer puts Spark's row metadata instead). Readers
need none of the last ones: parquet-avro and hudi-rs derive the schema from the Parquet
schema, so we write the Avro schema only when the caller gives one.

Why footers matter: the bloom index reads only footers (min/max prune, then bloom), and
confirms candidates by reading only the ``_hoodie_record_key`` column. Nothing here reads
rows it does not need. Files are GZIP like Hudi's default codec; timestamps are coerced to
microseconds because Hudi's Java readers cannot read nanosecond Parquet timestamps.
"""

from __future__ import annotations

import functools
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from streamer import defaults
from streamer.errors import CorruptDataError, SchemaError
from streamer.fs import FileSystem, read_failure
from streamer.table import meta_fields
from streamer.table.bloom import BloomFilter

META_COLUMNS = meta_fields.META_COLUMNS
RECORD_KEY = meta_fields.RECORD_KEY
BLOOM_KEY = "org.apache.hudi.bloomfilter"
BLOOM_TYPE_KEY = "hoodie_bloom_filter_type_code"
MIN_KEY = "hoodie_min_record_key"
MAX_KEY = "hoodie_max_record_key"
AVRO_SCHEMA_KEY = "parquet.avro.schema"


@dataclass(frozen=True)
class BaseFileFooter:
    """What the index needs from a base file, read without touching rows."""

    path: str
    num_rows: int
    kv: dict[str, str]
    schema: pa.Schema

    @property
    def min_record_key(self) -> str | None:
        return self.kv.get(MIN_KEY)

    @property
    def max_record_key(self) -> str | None:
        return self.kv.get(MAX_KEY)

    @property
    def bloom_type_code(self) -> str | None:
        return self.kv.get(BLOOM_TYPE_KEY)

    def bloom_filter(self) -> BloomFilter | None:
        raw = self.kv.get(BLOOM_KEY)
        if raw is None:
            return None
        try:
            return BloomFilter.from_footer(raw, self.bloom_type_code or "SIMPLE")
        except CorruptDataError as e:
            raise CorruptDataError(f"{e} (footer of {self.path})", self.path) from e


@dataclass(frozen=True)
class BaseFileStats:
    path: str
    num_rows: int
    size_bytes: int
    min_record_key: str | None
    max_record_key: str | None


def _open(fs: FileSystem, path: str) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(fs.open_input_file(path), page_checksum_verification=True)
    except (pa.ArrowInvalid, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        if (failed := read_failure(e, path, "reading a base file")) is not None:
            raise failed from e
        raise CorruptDataError(f"not a readable Parquet base file: {e}", path) from e


def read_footer(fs: FileSystem, path: str) -> BaseFileFooter:
    pf = _open(fs, path)
    md = pf.metadata
    kv = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in (md.metadata or {}).items()}
    return BaseFileFooter(path, md.num_rows, kv, pf.schema_arrow)


def read_base_file(fs: FileSystem, path: str, columns: list[str] | None = None) -> pa.Table:
    """Rows of a base file, reading only ``columns`` when given."""
    pf = _open(fs, path)
    if columns is not None:
        missing = [c for c in columns if c not in pf.schema_arrow.names]
        if missing:
            raise SchemaError(f"columns {missing} not in base file {path}")
    return pf.read(columns=columns)


def read_record_keys(fs: FileSystem, path: str) -> pa.Array:
    """Only the ``_hoodie_record_key`` column chunk(s) of a base file."""
    return read_base_file(fs, path, [RECORD_KEY]).column(0).combine_chunks()


def write_base_file(
    fs: FileSystem,
    path: str,
    table: pa.Table,
    *,
    bloom: BloomFilter | None = None,
    extra_kv: Mapping[str, str] | None = None,
    avro_schema: Mapping[str, Any] | str | None = None,
    codec: str = defaults.PARQUET_CODEC,
) -> BaseFileStats:
    """Write a Hudi base file: rows sorted by record key, Hudi's footer keys.

    ``bloom`` receives every record key of the file (pass a fresh filter; default is a new
    Hudi-default DYNAMIC_V0 filter). ``avro_schema`` (the table's writer schema) is stored
    as ``parquet.avro.schema`` like Hudi's Avro writer does.
    """
    missing = [c for c in META_COLUMNS if c not in table.column_names]
    if missing:
        raise SchemaError(f"base file {path} needs meta columns; missing {missing}")
    keys = table.column(RECORD_KEY)
    if keys.null_count:
        raise SchemaError(f"base file {path}: {keys.null_count} rows without _hoodie_record_key")
    table = table.take(pc.sort_indices(table, [(RECORD_KEY, "ascending")]))
    keys = table.column(RECORD_KEY)
    bloom = bloom if bloom is not None else BloomFilter.new_dynamic()
    kv: dict[str, str] = {}
    if table.num_rows:
        bloom.add_many(keys)
        kv[MIN_KEY] = keys[0].as_py()
        kv[MAX_KEY] = keys[-1].as_py()
    kv[BLOOM_KEY] = bloom.serialize()
    kv[BLOOM_TYPE_KEY] = bloom.type_code
    if avro_schema is not None:
        kv[AVRO_SCHEMA_KEY] = avro_schema if isinstance(avro_schema, str) else json.dumps(avro_schema, separators=(",", ":"))
        kv["writer.model.name"] = "avro"
    kv.update(extra_kv or {})
    size = write_parquet(fs, path, table, kv, codec=codec)
    return BaseFileStats(path, table.num_rows, size, kv.get(MIN_KEY), kv.get(MAX_KEY))


def parquet_bytes(table: pa.Table, kv: Mapping[str, str], *, codec: str = defaults.PARQUET_CODEC,
                  statistics: bool = True) -> bytes:
    """The one Parquet encoding of the project: base files (writer and compaction) and
    Parquet log blocks alike, ``kv`` in the footer as Hudi's files carry it.

    ``statistics=False`` for log blocks: no reader skips a log block's rows on its column
    statistics (a block's row that fails a filter may still replace a base row that passes
    it, so Hudi's readers and ours merge every block whole; base files keep them, which
    query engines prune row groups by). Computing min/max for a block's 11 columns was ~17%
    of its encoding on the 1M-row upsert (benchmarks/RESULTS.md, "Large batches"). A
    reader given a file without statistics only prunes less: never a wrong answer.

    ``store_schema=False`` and no schema metadata: pyarrow would otherwise copy the whole
    key-value metadata (our bloom filters, ~430 KB) a second time, base64-encoded, into
    ``ARROW:schema``; Hudi's files carry no Arrow schema either.

    ``_hoodie_commit_seqno`` and ``_hoodie_record_key`` are written with Parquet's
    ``DELTA_BYTE_ARRAY`` (prefix + suffix) encoding, not dictionary/plain: both are unique
    per row and share long prefixes (``<instant>_<task>_<n>``; keys sorted), so they were
    ~45% of a block's bytes beside 6 data columns, and shrink 30x and 5x (measured, issue
    13). Every reader of these files decodes it: parquet-mr (Apache Hudi 0.15 and 1.0,
    tests/hudi_jvm), arrow-rs (hudi-rs) and pyarrow; the encoding is per page, so files
    written before stay as they are.
    """
    table = table.replace_schema_metadata(None)
    sink = pa.BufferOutputStream()
    delta = [c for c in DELTA_COLUMNS
             if c in table.column_names and pa.types.is_string(table.schema.field(c).type)]
    skip = plain_columns(table).union(delta)
    kv = {**kv, SPARK_CALENDAR_KEY: SPARK_CALENDAR_VERSION}
    with pq.ParquetWriter(
        sink,
        table.schema,
        compression=codec,
        use_dictionary=[p for p in _leaf_paths(table.schema) if p not in skip] if skip else True,
        column_encoding=dict.fromkeys(delta, "DELTA_BYTE_ARRAY") or None,
        coerce_timestamps="us",
        allow_truncated_timestamps=False,
        write_statistics=statistics,
        store_schema=False,
        # CRC32 per page (the Parquet spec's page checksum): flipped bytes in a page are
        # caught on read instead of decoding to wrong values. Readers that do not verify
        # them (parquet-mr by default, arrow-rs) ignore them.
        write_page_checksum=True,
    ) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(dict(kv))
    return sink.getvalue().to_pybytes()


#: The footer key Spark reads to tell which calendar a file's dates and timestamps are in
#: (``DataSourceUtils.datetimeRebaseSpec``): a Spark 3+ version means the proleptic
#: Gregorian calendar Arrow writes, so they are read as they are. A file without it is
#: refused, by default, if it holds a date before 1582-10-15 or a timestamp before 1900
#: (``INCONSISTENT_BEHAVIOR_CROSS_VERSION.READ_ANCIENT_DATETIME``), which a ``0001-01-01``
#: from a database made Apache Hudi's Spark readers do (tests/hudi_jvm/test_debezium_tables.py).
SPARK_CALENDAR_KEY = "org.apache.spark.version"
#: The first Spark version of the proleptic Gregorian calendar.
SPARK_CALENDAR_VERSION = "3.0.0"


def plain_columns(table: pa.Table) -> set[str]:
    """Data columns to write PLAIN: those whose dictionary would not make them smaller.

    parquet-mr (Hudi's own writer) keeps a column's dictionary only while dictionary page
    plus indices are smaller than the plain values (``FallbackValuesWriter
    .isCompressionSatisfying``) and falls back to plain otherwise. Arrow's writer has no
    such check: it dictionary-encodes a column of unique ids or doubles in full, which
    costs more bytes than plain and a hash of every value. Measured (benchmarks/RESULTS.md) on the
    benchmark's rows: a 6,250-row log block encodes in 30% less time and 19% fewer bytes
    with its near-unique data columns plain, a 62,500-row base file in 46% less time (the
    sample below costs about a tenth of the block's encoding).

    The rule is parquet-mr's, decided up front: dictionary when ``D*v + n*bits(D)/8 <
    n*v`` (``v`` a value's plain size). ``D`` comes from a random sample of about
    ``sqrt(32 n)`` distinct rows (a hash of every value would cost as much as the
    dictionary it decides on): the pairs of equal values in the sample estimate
    ``sum c_i (c_i - 1)`` over the column, and ``n^2 / (n + that)`` is a lower bound on
    ``D``, so a column goes plain only when even the bound says the dictionary does not
    pay (skewed columns keep it); unique values have no equal pair, so they always go
    plain. The sample is seeded by the row count: the same rows always encode the same way.
    Flat columns only (numbers, temporals, decimals, strings, binaries); meta columns,
    nested and other types keep the dictionary, and so do files of fewer than
    ``_MIN_ROWS_FOR_PLAIN`` rows.
    """
    widths = {f.name: _plain_width(f.type) for f in table.schema if f.name not in meta_fields.META_COLUMNS}
    names = [name for name, w in widths.items() if w != 0]
    n = table.num_rows
    if not names or n < _MIN_ROWS_FOR_PLAIN:
        return set()
    draws = max(256, math.isqrt(32 * n) + 1)
    # distinct rows (a uniform random subset): in a column of unique values no pair is equal
    rows = np.arange(n) if draws >= n else np.unique(np.random.default_rng(n).integers(0, n, draws))
    sample = table.select(names).take(pa.array(rows))
    out: set[str] = set()
    for name in names:
        col = sample.column(name)
        if col.null_count:
            col = col.drop_null()
        s = len(col)
        total = n - table.column(name).null_count
        if s < 2 or total < _MIN_ROWS_FOR_PLAIN:
            continue
        # equal pairs among s of n rows, sum r_j (r_j - 1) over the sample's counts r_j,
        # estimate sum c_i (c_i - 1) over the column's counts c_i, scaled by n(n-1)/s(s-1)
        repeats = (_sum_of_squared_counts(col) - s) * total * (total - 1) / (s * (s - 1))
        distinct = total * total / (total + repeats)  # n^2 / sum c_i^2 <= D (Cauchy-Schwarz)
        width = widths[name]
        if width is None:  # BYTE_ARRAY: a 4-byte length before each value
            width = float(pc.mean(pc.binary_length(col)).as_py() or 0) + 4
        index_bits = max(1, int(distinct).bit_length())
        if distinct * width + total * index_bits / 8 >= total * width:
            out.add(name)
    return out


def _sum_of_squared_counts(col: pa.ChunkedArray) -> float:
    """``sum c_i^2`` over the distinct values of ``col`` (no nulls), ``c_i`` their counts."""
    if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
        a = np.sort(col.to_numpy())
        starts = np.flatnonzero(np.r_[True, a[1:] != a[:-1], True])
        runs = np.diff(starts).astype(np.float64)
    else:
        runs = pc.value_counts(col).field("counts").to_numpy().astype(np.float64)
    return float((runs * runs).sum())


#: Below this many values Arrow's default stays: the decision (~0.4 ms, mostly fixed)
#: costs about what PLAIN saves in encoding time at 4,096 rows, and more below.
_MIN_ROWS_FOR_PLAIN = 4096


def _plain_width(t: pa.DataType) -> float | None:
    """A value's PLAIN size in bytes; ``None`` for variable-length; ``0``: not decided here."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t):
        return None
    if (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_temporal(t)
            or pa.types.is_decimal(t) or pa.types.is_fixed_size_binary(t)) and t.bit_width >= 8:
        return t.byte_width
    return 0


#: Meta columns unique per row with shared prefixes: see :func:`parquet_bytes`.
DELTA_COLUMNS = (meta_fields.COMMIT_SEQNO, meta_fields.RECORD_KEY)


@functools.lru_cache(maxsize=64)
def _leaf_paths(schema: pa.Schema) -> tuple[str, ...]:
    """Parquet leaf column paths of ``schema`` (``use_dictionary`` wants leaves: ``s.y``,
    ``l.list.element``), taken from an empty file's schema, so nesting rules are pyarrow's own."""
    sink = io.BytesIO()
    pq.write_table(schema.empty_table(), sink, store_schema=False)
    sink.seek(0)
    md = pq.read_metadata(sink)
    return tuple(md.schema.column(i).path for i in range(md.num_columns))


def write_parquet(fs: FileSystem, path: str, table: pa.Table, kv: Mapping[str, str], *,
                  codec: str = defaults.PARQUET_CODEC) -> int:
    """Write :func:`parquet_bytes` to ``path`` atomically (never seen half-written); its size."""
    data = parquet_bytes(table, kv, codec=codec)
    fs.write_atomic(path, data)
    return len(data)

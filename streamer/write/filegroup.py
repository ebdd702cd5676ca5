"""The per-file-group write: the one function both engines run, on the driver or executors.

Given a file group and the rows routed to it (inserts, updates, deletes), it

* opens a *new* file group with a base file (RFC-06: a group always starts with one),
  carrying Hudi's footer index (bloom, min/max key); or
* appends to an existing group one new log file version holding data blocks sorted by
  key — Parquet blocks whose footers have the block's index and the key range of the
  slice's log blocks; several when the data exceeds ``log_block_max_size`` — and a
  delete block,

and returns the Hudi write stat the driver puts in the commit metadata. Every data file
is preceded by its marker and written atomically (temp + fsync + rename), so a crash
leaves either no file or a complete one plus a marker that tells rollback about it.

It is a plain function over picklable dataclasses and an Arrow table: no driver state,
so Spark can ship it to executors unchanged.
"""

from __future__ import annotations

import functools
import json
import posixpath
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer import defaults, faults
from streamer.data import key_order, numbered_strings
from streamer.fs import FileSystem
from streamer.index.rfc06 import BloomParams, KeySummary, block_metadata, extend
from streamer.index.slice_members import (
    is_committed_fn,
    remember_base_file_keys,
    remember_block_keys,
    slice_members,
)
from streamer.table import meta_fields
from streamer.table.base_file import parquet_bytes
from streamer.table.fsview import FileSlice
from streamer.table.log_format import (
    BlockType,
    HeaderKey,
    LogBlockFormat,
    encode_block,
    encode_data_block,
)
from streamer.table.metadata import WriteStat
from streamer.table.naming import base_file_name, write_token
from streamer.write.keygen import DEFAULT_PARTITION, PARTITION_PATH_COL, RECORD_KEY_COL
from streamer.write.log_file import SliceTarget, delete_block, write_log_file
from streamer.write.markers import IOType, Marker, create_marker

OP_COL = "_mor_op"
OP_INSERT, OP_UPDATE, OP_DELETE = 0, 1, 2
COMMIT_TIME_COL = meta_fields.COMMIT_TIME
SEQNO_COL = meta_fields.COMMIT_SEQNO
FILE_NAME_COL = meta_fields.FILE_NAME
META_ORDER = (COMMIT_TIME_COL, SEQNO_COL, RECORD_KEY_COL, PARTITION_PATH_COL, FILE_NAME_COL)


@dataclass(frozen=True)
class WriteContext:
    """Everything a file-group write needs that is the same for the whole commit."""

    fs: FileSystem
    base_path: str
    instant: str
    data_schema: pa.Schema  # the commit's data columns (no meta columns)
    writer_avro_schema: str  # JSON, meta fields included (log block SCHEMA header)
    block_format: LogBlockFormat
    bloom: BloomParams
    ordering_field: str | None
    completed: frozenset[str]
    first_active: str | None
    #: Parquet compression of base files and Parquet log blocks (``WriteOptions.parquet_codec``)
    codec: str = defaults.PARQUET_CODEC
    #: a file group's data in one commit is split into blocks of about this many bytes
    #: (``WriteOptions.log_block_max_size``, Hudi's ``hoodie.logfile.data.block.max.size``)
    log_block_max_size: int = defaults.LOG_BLOCK_MAX_SIZE
    #: whether a Parquet data block carries its own bloom filter: only the bloom index
    #: probes it, so a bucket-index table's blocks carry the key range only (as Hudi's own
    #: log blocks carry none); base files keep theirs (Hudi writes one into every base file)
    block_filters: bool = True
    #: table version 8+: each commit writes its own log files, named by its instant (Hudi
    #: 1.x slices them by the commit's completion time), never a next version of a
    #: slice's log (see :class:`streamer.write.log_file.SliceTarget`)
    log_per_instant: bool = False
    #: a string data column whose value on every row is the row's partition path (a
    #: simple key generator's one field, neither Hive-style nor URL-encoded): a file
    #: group's copy of it is written as its partition's one value (a one-entry
    #: dictionary, as the meta columns that hold one value per file), not gathered and
    #: hashed row by row - except in the default partition, which null and empty share
    partition_value_column: str | None = None
    #: local engine only: each looked-up slice's log-blocks key range as the index read
    #: it, keyed by (partition, file id, base instant), so appending does not read and
    #: parse the newest block's footer again (never shipped to Spark executors)
    slice_seeds: Mapping[tuple[str, str, str], KeySummary] | None = field(
        default=None, compare=False, repr=False
    )


@dataclass(frozen=True)
class FileGroupTask:
    """One file group's share of the commit (decided on the driver)."""

    task_id: int
    partition: str
    file_id: str
    is_new: bool
    base_instant: str
    base_file: str | None = None  # existing base file name
    log_files: tuple[str, ...] = ()  # existing log file names, in order
    next_log_version: int = 1
    slice: FileSlice | None = None


def _full_path(ctx: WriteContext, partition: str, name: str) -> str:
    return posixpath.join(ctx.base_path, partition, name) if partition else posixpath.join(
        ctx.base_path, name
    )


def _rel_path(partition: str, name: str) -> str:
    return f"{partition}/{name}" if partition else name


def _key_ordered(rows: pa.Table, short: np.ndarray | None) -> tuple[pa.Table, np.ndarray | None]:
    """``rows`` sorted by record key (stably), with their short-key integers when given
    (``None`` otherwise). The local engine hands them over sorted: one pass checks it."""
    if short is not None and len(short) != rows.num_rows:
        short = None
    if rows.num_rows < 2:
        return rows, short
    if short is not None:
        if bool((short[1:] >= short[:-1]).all()):
            return rows, short
        order = key_order(short)
        return rows.take(pa.array(order)), short[order]
    if _sorted_by_key(rows):
        return rows, None
    return rows.take(pc.sort_indices(rows, [(RECORD_KEY_COL, "ascending")])), None


def _upserts(rows: pa.Table, short: np.ndarray | None) -> tuple[pa.Table, pa.Table, np.ndarray | None]:
    """``rows`` split into the data they write and their deletes, the short keys kept
    with the data (no copy of the rows when there is no delete, the common case)."""
    is_delete = pc.equal(rows.column(OP_COL), OP_DELETE)
    if not pc.any(is_delete).as_py():
        return rows, rows.slice(0, 0), short
    keep = pc.invert(is_delete)
    kept = None if short is None else short[keep.to_numpy(zero_copy_only=False)]
    return rows.filter(keep), rows.filter(is_delete), kept


def _with_meta(ctx: WriteContext, rows: pa.Table, task: FileGroupTask, file_name: str) -> pa.Table:
    """Data columns in schema order, Hudi's five meta columns first; ``rows`` are sorted by
    key (:func:`_key_ordered`).

    The three columns that hold one value per file (commit time, partition path, file
    name) are one-entry dictionaries: Parquet's writer takes the dictionary as it is,
    instead of hashing every row's copy of the value into one, and writes the same bytes
    (measured: identical files, half the time for those columns). The partition path is
    the task's: the plan sends a file group only rows of its partition (the index matched
    them by partition; a global index's moves rewrite it first).
    """
    n = rows.num_rows
    seqno = numbered_strings(f"{ctx.instant}_{task.task_id}_", n)
    meta = {
        COMMIT_TIME_COL: _constant(ctx.instant, n),
        SEQNO_COL: seqno,
        RECORD_KEY_COL: rows.column(RECORD_KEY_COL).combine_chunks().cast(pa.string()),
        PARTITION_PATH_COL: _constant(task.partition, n),
        FILE_NAME_COL: _constant(file_name, n),
    }
    arrays = [meta[c] for c in META_ORDER]
    fields = [pa.field(c, meta[c].type) for c in META_ORDER]
    for f in ctx.data_schema:
        if f.name == ctx.partition_value_column and task.partition != DEFAULT_PARTITION:
            arrays.append(_constant(task.partition, n))
            fields.append(f.with_type(arrays[-1].type))
            continue
        col = rows.column(f.name) if f.name in rows.column_names else pa.nulls(n, f.type)
        arrays.append(col if col.type.equals(f.type) else col.cast(f.type))
        fields.append(f)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _constant(value: str, n: int) -> pa.DictionaryArray:
    """``n`` rows of ``value``: a one-entry dictionary (see :func:`_with_meta`)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([value], pa.string()))


def _plain_meta(data: pa.Table) -> pa.Table:
    """``data`` with its one-value columns (:func:`_constant`) as plain strings (for the Avro encoder)."""
    schema = pa.schema([f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f for f in data.schema])
    return data.cast(schema)


def _sorted_by_key(rows: pa.Table) -> bool:
    """Already in key order (the local engine hands rows over sorted): one linear pass."""
    n = rows.num_rows
    if n < 2:
        return True
    keys = rows.column(RECORD_KEY_COL)
    if keys.null_count:
        return False
    keys = keys.combine_chunks()
    return bool(pc.all(pc.less_equal(keys.slice(0, n - 1), keys.slice(1))).as_py())


def _counts(rows: pa.Table) -> tuple[int, int, int]:
    ops = rows.column(OP_COL).combine_chunks()
    vc = {d["values"]: d["counts"] for d in pc.value_counts(ops).to_pylist()}
    return vc.get(OP_INSERT, 0), vc.get(OP_UPDATE, 0), vc.get(OP_DELETE, 0)


def write_file_group(ctx: WriteContext, task: FileGroupTask, rows: pa.Table, *,
                     short: np.ndarray | None = None) -> WriteStat:
    """Write ``rows`` (with an ``_mor_op`` column) into ``task``'s file group; ``short``:
    their record keys as :func:`streamer.data.short_keys` integers, if the engine made
    them (the filters hash from them, and the process keeps them for its next lookup)."""
    started = time.monotonic()
    n_ins, n_upd, n_del = _counts(rows)
    token = write_token(task.task_id, 0, 0)
    if task.is_new:
        stat = _write_new_group(ctx, task, rows, token, short)
        stat.runtime_stats = {
            "totalScanTime": 0,
            "totalUpsertTime": 0,
            "totalCreateTime": int((time.monotonic() - started) * 1000),
        }
    else:
        stat = _append_to_group(ctx, task, rows, token, short)
        stat.runtime_stats = {
            "totalScanTime": 0,
            "totalUpsertTime": int((time.monotonic() - started) * 1000),
            "totalCreateTime": 0,
        }
    stat.num_inserts, stat.num_update_writes, stat.num_deletes = n_ins, n_upd, n_del
    stat.num_writes = n_ins + n_upd
    return stat


# ----------------------------------------------------------------------------- new groups
def _write_new_group(ctx: WriteContext, task: FileGroupTask, rows: pa.Table, token: str,
                     short: np.ndarray | None) -> WriteStat:
    name = base_file_name(task.file_id, token, ctx.instant)
    create_marker(ctx.fs, ctx.base_path, ctx.instant, Marker(task.partition, name, IOType.CREATE))
    faults.step(f"marker CREATE {name}")
    upserts, _, short = _upserts(rows, short)
    upserts, short = _key_ordered(upserts, short)
    data = _with_meta(ctx, upserts, task, name)
    keys = data.column(RECORD_KEY_COL).combine_chunks()
    own = KeySummary.of_keys(keys, ctx.bloom.sized_for(len(keys)), is_sorted=True, short=short)
    content = parquet_bytes(data, own.to_kv(slice_level=False), codec=ctx.codec)
    path = _full_path(ctx, task.partition, name)
    faults.step(f"before base file {name}")
    ctx.fs.write_atomic(path, content)
    faults.step(f"after base file {name}")
    if ctx.fs.is_local:  # a base file's cache key has its modification time: one stat, local only
        remember_base_file_keys(ctx.fs.status(path), keys, short)
    return WriteStat(
        file_id=task.file_id,
        path=_rel_path(task.partition, name),
        prev_commit="null",
        partition_path=task.partition,
        total_write_bytes=len(content),
        file_size_in_bytes=len(content),
    )


# ----------------------------------------------------------------------------- appends
def _slice_seed(ctx: WriteContext, task: FileGroupTask) -> KeySummary | None:
    """The key range of the slice's log blocks before this write (what the next block's
    ``mor_streamer.logs.*`` extends; see ``rfc06``).

    Taken from the newest committed block's footer (as the index read it, or read
    again); ``None`` for the slice's first block. After stitched, Avro, foreign or
    older-format blocks it is rebuilt from the log blocks still in effect: a Parquet
    block's own footer range, an Avro block's keys (never the base file's: its footer
    answers for it).
    """
    if task.slice is None:
        return None
    if ctx.slice_seeds:
        s = task.slice
        seed = ctx.slice_seeds.get((s.partition_path, s.file_id, s.base_instant))
        if seed is not None and seed.min_key is not None:
            return seed
    members = slice_members(ctx.fs, task.slice, is_committed_fn(ctx.completed, ctx.first_active))
    logs = [m for m in members if m.kind in ("parquet", "avro")]
    if not logs:
        return None
    if logs[-1].kind == "parquet" and logs[-1] is members[-1]:
        summary = logs[-1].logs_summary(None)
        if summary is not None and summary.min_key is not None:
            return summary
    rebuilt: KeySummary | None = None
    for m in logs:
        own = KeySummary.from_kv(m.footer_kv(None), slice_level=False, with_bloom=False)
        if own is not None and own.min_key is not None and own.max_key is not None:
            rebuilt = extend(rebuilt, pa.array([own.min_key, own.max_key], pa.string()))
        else:
            rebuilt = extend(rebuilt, m.keys(None).cast(pa.string()))
    return rebuilt


def block_row_ranges(rows: pa.Table, max_bytes: int) -> list[tuple[int, int]]:
    """``(offset, length)`` of each data block's rows: about ``max_bytes`` of rows each.

    As Hudi's append handle does (``hoodie.logfile.data.block.max.size``), the split is
    by row count from the rows' average in-memory size, not by encoding and measuring:
    a block holds at least one row, and the rows are spread evenly over the blocks.
    """
    n = rows.num_rows
    size = rows.nbytes
    if n <= 1 or size <= max_bytes:
        return [(0, n)]
    count = min(n, -(-size // max_bytes))
    per_block = -(-n // count)
    return [(start, min(per_block, n - start)) for start in range(0, n, per_block)]


@functools.lru_cache(maxsize=8)
def _parsed_schema(text: str) -> dict:
    """The commit's writer schema, parsed once per process, not once per file group."""
    return json.loads(text)


#: A framed data block, its record keys and their short-key integers (Parquet blocks;
#: ``None`` for Avro, and for keys that have no short form).
_Block = tuple[bytes, "pa.Array | None", "np.ndarray | None"]


def _data_blocks(ctx: WriteContext, task: FileGroupTask, data: pa.Table, header: dict,
                 short: np.ndarray | None = None) -> list[_Block]:
    """The framed data blocks of ``data`` (sorted by key; ``short``: its keys' short-key
    integers, if made), split by ``ctx.log_block_max_size``, each with its record keys.

    Parquet blocks chain the log blocks' cumulative key range: each block's is the
    previous block's plus its own keys, so the newest block's covers the slice's logs.
    """
    ranges = block_row_ranges(data, ctx.log_block_max_size)
    if ctx.block_format is not LogBlockFormat.PARQUET:
        avro_schema = _parsed_schema(ctx.writer_avro_schema)
        data = _plain_meta(data)
        return [
            (encode_data_block(data.slice(start, length), header, kind=BlockType.AVRO_DATA,
                               avro_schema=avro_schema), None, None)
            for start, length in ranges
        ]
    blocks: list[_Block] = []
    seed = _slice_seed(ctx, task)
    for i, (start, length) in enumerate(ranges):
        rows = data.slice(start, length)
        keys = rows.column(RECORD_KEY_COL).combine_chunks()
        own_short = None if short is None else short[start : start + length]
        kv = block_metadata(keys, seed, ctx.bloom, task.base_instant, with_bloom=ctx.block_filters,
                            short=own_short)
        # rows are already sorted by key; framing the Parquet bytes ourselves skips
        # encode_data_block's default-sized filter that our kv would replace anyway
        content = parquet_bytes(rows, kv, codec=ctx.codec, statistics=False)
        blocks.append((encode_block(BlockType.PARQUET_DATA, header, content), keys, own_short))
        if i + 1 < len(ranges):
            # the next block chains on exactly what this one's footer says
            seed = KeySummary.from_kv(
                {k.encode(): v.encode() for k, v in kv.items()}, slice_level=False, logs_level=True
            )
    return blocks


def _append_to_group(ctx: WriteContext, task: FileGroupTask, rows: pa.Table, token: str,
                     short: np.ndarray | None) -> WriteStat:
    target = SliceTarget(ctx.base_path, task.partition, task.file_id, task.base_instant,
                         1 if ctx.log_per_instant else task.next_log_version, token, task.base_file,
                         tuple(task.log_files), name_instant=ctx.instant if ctx.log_per_instant else None)
    header = {HeaderKey.INSTANT_TIME: ctx.instant, HeaderKey.SCHEMA: ctx.writer_avro_schema}
    blocks: list[bytes] = []
    # (offset in the log file, keys, their short keys) per data block
    written_keys: list[tuple[int, pa.Array, np.ndarray | None]] = []
    upserts, deletes, short = _upserts(rows, short)
    if upserts.num_rows:
        upserts, short = _key_ordered(upserts, short)
        data = _with_meta(ctx, upserts, task, task.file_id)
        for block, keys, block_short in _data_blocks(ctx, task, data, header, short):
            if keys is not None:
                written_keys.append((sum(len(b) for b in blocks), keys, block_short))
            blocks.append(block)
    if deletes.num_rows:
        ordering = (deletes.column(ctx.ordering_field)
                    if ctx.ordering_field and ctx.ordering_field in deletes.column_names else None)
        if ordering is not None and ordering.null_count:
            ordering = None  # some deletes are by key: all of the block orders by commit time
        partitions = pc.fill_null(pa.nulls(deletes.num_rows, pa.string()), task.partition)  # the group's
        blocks.append(delete_block(deletes.column(RECORD_KEY_COL), partitions,
                                   ordering, {HeaderKey.INSTANT_TIME: ctx.instant}))
    stat = write_log_file(ctx.fs, target, ctx.instant, blocks)
    remember_block_keys(target.path_of(target.log_name), stat.file_size_in_bytes, ctx.instant, written_keys)
    return stat

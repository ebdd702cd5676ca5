"""Merging one file slice: base records overlaid by the log's records, in Arrow.

Two steps, both free of per-record Python loops:

1. :func:`effective_blocks` decides which log blocks count. Only blocks of completed
   instants; a rollback command block cancels every block of its target instant
   wherever it sits in the log; a log-compacted block (``COMPACTED_BLOCK_TIMES``) stands
   in for the blocks it names - but only once its own instant completed, else the
   originals stay; corrupt blocks are skipped and reported.
2. :func:`merge_records` stacks base and block records with their position
   (``seq`` = block order, ``row`` = order within the block), sorts by
   ``(key, [ordering value], seq, row)`` and keeps each key's last row. Event-time
   ordering (a precombine/ordering field) lets an older-but-later-written record lose;
   commit-time ordering is pure write order. Deletes (delete blocks and
   ``_hoodie_is_deleted``) then remove the winners they beat, vectorised with a join.

A log-compacted block takes the position of the last block it replaces, so blocks
appended after the compacted range (RFC-48 scenario 1) still win under commit-time order;
the other blocks of the same run (a split data block, the run's delete block) follow it
there, never drift to the end of the log.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer.errors import SchemaError
from streamer.table import meta_fields
from streamer.table.log_format import ROLLBACK_COMMAND, BlockType, HeaderKey
from streamer.table.payload_deletes import payload_order_winners

log = logging.getLogger(__name__)

RECORD_KEY = meta_fields.RECORD_KEY
PARTITION_PATH = meta_fields.PARTITION_PATH
COMMIT_TIME = meta_fields.COMMIT_TIME
IS_DELETED = meta_fields.IS_DELETED
META_COLUMNS = meta_fields.META_COLUMNS
_KEY, _SEQ, _ROW, _ORD = "__mor_key", "__mor_seq", "__mor_row", "__mor_ord"

# Log block types (the int32 on the wire).
# The block types and header keys are log_format's: one table of the wire codes.
COMMAND, DELETE, CORRUPT, CDC = BlockType.COMMAND, BlockType.DELETE, BlockType.CORRUPT, BlockType.CDC
DATA_TYPES = frozenset({BlockType.AVRO_DATA, BlockType.HFILE_DATA, BlockType.PARQUET_DATA})


class BlockLike(Protocol):
    """What merging needs from :class:`streamer.table.log_format.LogBlock`."""

    block_type: Any
    header: Any

    @property
    def instant_time(self) -> str | None: ...
    @property
    def target_instant_time(self) -> str | None: ...
    @property
    def compacted_block_times(self) -> Sequence[str] | None: ...
    @property
    def corrupt_reason(self) -> str | None: ...
    def records(self, columns: list[str] | None = None, *, missing_ok: bool = False) -> pa.Table: ...
    def deletes(self) -> pa.Table: ...


#: A block type (:class:`~streamer.table.log_format.LogBlock`, a test's stand-in):
#: :func:`effective_blocks` gives back the caller's own blocks.
BlockT = TypeVar("BlockT", bound=BlockLike)


def block_type_code(block: BlockLike) -> int:
    bt = block.block_type
    if isinstance(bt, Enum):
        bt = bt.value
    return int(bt)


def command_type(block: BlockLike) -> str | None:
    """The COMMAND_BLOCK_TYPE header value, ``ROLLBACK_COMMAND`` ('0') for a rollback."""
    for k, v in (block.header or {}).items():
        code = k.value if isinstance(k, Enum) else k
        if code == HeaderKey.COMMAND_BLOCK_TYPE:
            return str(v)
    return None


@dataclass
class CorruptBlock:
    path: str
    reason: str
    offset: int | None = None  # where the damaged region starts in the log file


@dataclass
class ScanStats:
    """Counters of one read: what was skipped and why (never silently)."""

    corrupt_blocks: list[CorruptBlock] = field(default_factory=list)
    rolled_back_blocks: int = 0
    uncommitted_blocks: int = 0
    compacted_away_blocks: int = 0
    log_blocks_read: int = 0
    file_slices: int = 0
    base_row_groups_pruned: int = 0  # not read: statistics ruled the filter out (slice_reader)
    base_rows_pruned: int = 0  # read, dropped before the merge by the filter

    def add(self, other: ScanStats) -> None:
        self.corrupt_blocks.extend(other.corrupt_blocks)
        self.rolled_back_blocks += other.rolled_back_blocks
        self.uncommitted_blocks += other.uncommitted_blocks
        self.compacted_away_blocks += other.compacted_away_blocks
        self.log_blocks_read += other.log_blocks_read
        self.file_slices += other.file_slices
        self.base_row_groups_pruned += other.base_row_groups_pruned
        self.base_rows_pruned += other.base_rows_pruned

    @property
    def corrupt_block_count(self) -> int:
        return len(self.corrupt_blocks)


def effective_blocks(
    blocks: Sequence[tuple[str, BlockT]], completed: Container[str | None], stats: ScanStats
) -> list[BlockT]:
    """Filter a slice's blocks (``(log path, block)`` in log order) to the ones that count,
    in the order they apply (a log-compacted run where the blocks it replaced were).

    ``completed`` answers "did this instant commit": a set of instants, or any container
    (the index's also counts instants older than the active timeline as committed)."""
    kept: list[tuple[str | None, BlockT]] = []  # (instant, block)
    # Blocks of one log-compacted run (same instant and COMPACTED_BLOCK_TIMES: a split
    # data block, the run's delete block) stay together where the run was.
    runs: dict[tuple[str | None, tuple[str, ...]], BlockT] = {}  # run -> its last block
    compacted_instants: dict[str | None, BlockT] = {}  # instant -> its last block
    for path, b in blocks:
        code = block_type_code(b)
        if code == CORRUPT or getattr(b, "corrupt_reason", None):
            reason = getattr(b, "corrupt_reason", None) or "corrupt block"
            stats.corrupt_blocks.append(CorruptBlock(path, reason, getattr(b, "offset", None)))
            log.warning("skipping corrupt log block in %s: %s", path, reason)
            continue
        stats.log_blocks_read += 1
        if code == COMMAND:
            if command_type(b) in (None, ROLLBACK_COMMAND) and b.target_instant_time:
                before = len(kept)
                kept = [(t, k) for t, k in kept if t != b.target_instant_time]
                stats.rolled_back_blocks += before - len(kept)
            continue
        if code == CDC:
            continue
        instant = b.instant_time
        if instant not in completed:
            stats.uncommitted_blocks += 1
            continue
        compacted = list(b.compacted_block_times or [])
        if compacted:
            run = (instant, tuple(compacted))
            names = set(compacted)
            positions = [i for i, (t, _) in enumerate(kept) if t in names]
            prev = runs.get(run)
            at = len(kept)
            if positions:
                at = positions[-1] - (len(positions) - 1)
                kept = [e for e in kept if e[0] not in names]
                stats.compacted_away_blocks += len(positions)
            kept.insert(at if prev is None else _after(kept, prev), (instant, b))
            runs[run] = compacted_instants[instant] = b
            continue
        if instant in compacted_instants:  # a block of a log compaction without the header
            kept.insert(_after(kept, compacted_instants[instant]), (instant, b))
            compacted_instants[instant] = b
            continue
        kept.append((instant, b))
    # A rollback may target a block that appears *after* it (reordered logs): drop those too.
    targets = {
        b.target_instant_time
        for _, b in blocks
        if not getattr(b, "corrupt_reason", None) and block_type_code(b) == COMMAND and b.target_instant_time
    }
    final = [k for t, k in kept if t not in targets]
    stats.rolled_back_blocks += len(kept) - len(final)
    return final


def _after(kept: Sequence[tuple[str | None, BlockLike]], block: BlockLike | None) -> int:
    """Index just after ``block`` in ``kept`` (the end if absent)."""
    if block is not None:
        for i in range(len(kept) - 1, -1, -1):
            if kept[i][1] is block:
                return i + 1
    return len(kept)


# ============================================================================= record merging
@dataclass(frozen=True)
class MergeSpec:
    """How records of one table are keyed and ordered."""

    record_key_fields: tuple[str, ...] = ()
    ordering_field: str | None = None
    event_time_ordering: bool = True
    populate_meta_fields: bool = True
    #: table version 6: delete blocks ordered as Hudi 0.x's payload orders them (a record
    #: written after a delete wins; see :mod:`streamer.table.payload_deletes`)
    payload_delete_order: bool = False

    def key_columns(self) -> list[str]:
        if self.populate_meta_fields:
            return [RECORD_KEY]
        return list(self.record_key_fields)

    def needed_columns(self) -> list[str]:
        out = self.key_columns()
        if self.ordering_field and self.event_time_ordering:
            out.append(self.ordering_field)
        return out + [IS_DELETED]


def record_keys(table: pa.Table, spec: MergeSpec) -> pa.Array:
    """The record key column as strings, composed from key fields without meta fields."""
    if spec.populate_meta_fields and RECORD_KEY in table.column_names:
        return pc.cast(table.column(RECORD_KEY), pa.string()).combine_chunks()
    fields = spec.record_key_fields
    if not fields:
        raise ValueError("table has no meta fields and no record key fields")
    if len(fields) == 1:
        return pc.cast(table.column(fields[0]), pa.string()).combine_chunks()
    parts: list[Any] = []
    for i, f in enumerate(fields):
        prefix = ("," if i else "") + f + ":"
        parts.append(pa.scalar(prefix))
        parts.append(pc.fill_null(pc.cast(table.column(f), pa.string()), "__null__"))
    return pc.binary_join_element_wise(*parts, "").combine_chunks()


def align_tables(tables: Sequence[pa.Table], schema: pa.Schema | None = None) -> list[pa.Table]:
    """Cast tables to one schema (union of theirs unless given); missing columns are nulls."""
    tables = [t for t in tables if t is not None]
    if not tables:
        return []
    if schema is None:
        schema = pa.unify_schemas([t.schema for t in tables], promote_options="permissive")
    target = schema.remove_metadata()
    return [pa.Table.from_arrays([column_as(t, f) for f in schema], schema=target)
            for t in tables]


def column_as(table: pa.Table, f: pa.Field) -> pa.Array | pa.ChunkedArray:
    """Column ``f.name`` of ``table`` as ``f.type``; nulls where the table has no such column.

    A cast Arrow refuses is a :class:`SchemaError` naming the field: a batch a writer must
    not half-write, or a file whose values the table's schema cannot hold. Never nulls in
    their place: a read would lose the column's values silently, and a compaction would
    write the nulls into the table for good.
    """
    if f.name not in table.column_names:
        return pa.nulls(table.num_rows, f.type)
    col = table.column(f.name)
    if col.type.equals(f.type):
        return col
    try:
        # Avro's promotions of int and long to float and double round, as Java's conversion
        # does: Arrow's safe cast refuses a value it cannot hold exactly (a long above 2**53)
        return col.cast(f.type, safe=not _rounding_promotion(col.type, f.type))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise SchemaError(f"field {f.name!r}: cannot cast {col.type} to {f.type}: {e}") from e


def _rounding_promotion(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether ``source`` -> ``target`` is an integer's promotion to a floating point type,
    which keeps every value but may round it (the schema evolution Avro and Hudi allow)."""
    return pa.types.is_integer(source) and pa.types.is_floating(target)


def concat_aligned(tables: Sequence[pa.Table], schema: pa.Schema | None = None) -> pa.Table | None:
    aligned = align_tables(tables, schema)
    if not aligned:
        return None
    return pa.concat_tables(aligned) if len(aligned) > 1 else aligned[0]


def _tag(table: pa.Table, seq: int, spec: MergeSpec) -> pa.Table:
    n = len(table)
    table = table.append_column(_KEY, record_keys(table, spec))
    table = table.append_column(_SEQ, pa.array(np.full(n, seq, dtype=np.int32)))
    return table.append_column(_ROW, pa.array(np.arange(n, dtype=np.int64)))


def merge_records(
    base: pa.Table | None,
    blocks: Sequence[tuple[str, pa.Table]],
    spec: MergeSpec,
    columns: Sequence[str] | None = None,
) -> pa.Table | None:
    """Merge base records with log blocks (``("data"|"delete", table)`` in effective order).

    Delete tables carry ``_hoodie_record_key`` (and ``ordering_value`` when the writer
    set one). Returns ``None`` when there is nothing at all. Rows come out in record
    key order. ``columns``: the columns the caller keeps afterwards (``None``: all); the
    others (the record key, the ordering value) are not carried through the final gather.

    When the base is in strict key order (our writer's and Hudi's sorted base files)
    only the base rows whose keys the log mentions take part in the sort; the rest stay
    where they are and the two key-ordered parts are interleaved by binary search, in
    one gather of the output columns. The result is the same as sorting everything, at
    the cost of the touched rows.
    """
    if base is not None and not blocks:
        return base  # nothing to overlay: a base file holds one version per key
    data: list[pa.Table] = []
    deletes: list[pa.Table] = []
    if base is not None:
        data.append(_tag(base, 0, spec))
    for seq, (kind, t) in enumerate(blocks, start=1):
        if kind == "delete":
            deletes.append(_tag_deletes(t, seq))
        elif len(t):
            data.append(_tag(t, seq, spec))
    if not data:
        return None
    schema = pa.unify_schemas([t.schema for t in data], promote_options="permissive")
    touched = _touched_rows(data[0], data[1:], deletes) if base is not None else None
    if touched is None:
        return _keep(_merge_sorted(data, deletes, spec, schema), columns)
    merged = _merge_sorted([data[0].filter(pa.array(touched)), *data[1:]], deletes, spec, schema, drop=False)
    return _interleave(data[0], touched, merged, schema, columns)


def _keep(table: pa.Table | None, columns: Sequence[str] | None) -> pa.Table | None:
    if table is None or columns is None:
        return table
    wanted = set(columns)
    return table.select([c for c in table.column_names if c in wanted])


def _touched_rows(base: pa.Table, logs: list[pa.Table], deletes: list[pa.Table]) -> np.ndarray | None:
    """Which base rows some log block names (a boolean mask), or ``None`` when the
    shortcut does not apply (base not strictly key-ordered, null keys, most rows touched)."""
    keys = base.column(_KEY)
    n = len(keys)
    if n < 2 or keys.null_count:
        return None
    log_keys = [t.column(_KEY) for t in logs] + [d.column(_KEY) for d in deletes]
    if any(k.null_count for k in log_keys):
        return None
    keys = keys.combine_chunks()
    if not pc.all(pc.less(keys.slice(0, n - 1), keys.slice(1))).as_py():
        return None  # not sorted, or a key repeats: the full merge decides
    if not log_keys:
        return np.zeros(n, dtype=bool)
    named = pa.chunked_array([c for k in log_keys for c in k.chunks], pa.string())
    touched = pc.is_in(keys, value_set=named).to_numpy(zero_copy_only=False)
    if touched.sum() * 2 > n:
        return None  # most rows change: sorting them all costs about the same
    return touched


def _interleave(base: pa.Table, touched: np.ndarray, merged: pa.Table | None, schema: pa.Schema,
                columns: Sequence[str] | None) -> pa.Table:
    """The base rows no log names (minus those flagged ``_hoodie_is_deleted``) and the
    merged rows (their keys are disjoint from those), in key order, output columns only."""
    keep = ~touched
    if IS_DELETED in base.column_names:
        flag = pc.fill_null(pc.cast(base.column(IS_DELETED), pa.bool_()), False)
        keep &= ~flag.to_numpy(zero_copy_only=False)
    untouched = np.flatnonzero(keep)
    names = [f.name for f in schema if f.name not in (_KEY, _SEQ, _ROW, _ORD)
             and (columns is None or f.name in columns)]
    out_schema = pa.schema([schema.field(c) for c in names])
    (a,) = align_tables([base.select([c for c in names if c in base.column_names])], out_schema)
    if merged is None or not len(merged):
        return a.take(pa.array(untouched))
    # each merged row goes after the untouched base rows with smaller keys
    below = pc.search_sorted(base.column(_KEY), merged.column(_KEY)).to_numpy(zero_copy_only=False)
    before = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])[below]
    na, nb = len(untouched), len(merged)
    b_pos = before + np.arange(nb, dtype=np.int64)
    perm = np.empty(na + nb, dtype=np.int64)
    is_b = np.zeros(na + nb, dtype=bool)
    is_b[b_pos] = True
    perm[b_pos] = len(base) + np.arange(nb, dtype=np.int64)
    perm[~is_b] = untouched
    (b,) = align_tables([merged], out_schema)
    return pa.concat_tables([a, b]).take(pa.array(perm))


def _finish(winners: pa.Table, drop: bool = True) -> pa.Table:
    """Drop winners flagged ``_hoodie_is_deleted`` and (``drop``) the merge's own columns
    (all but ``_KEY`` otherwise)."""
    if IS_DELETED in winners.column_names:
        flag = pc.fill_null(pc.cast(winners.column(IS_DELETED), pa.bool_()), False)
        winners = winners.filter(pc.invert(flag))
    own = (_KEY, _SEQ, _ROW, _ORD) if drop else (_SEQ, _ROW, _ORD)
    return winners.drop_columns([c for c in own if c in winners.column_names])


def _merge_sorted(
    data: list[pa.Table], deletes: list[pa.Table], spec: MergeSpec, schema: pa.Schema, drop: bool = True
) -> pa.Table | None:
    """Each key's winner among ``data`` (tagged), deletes applied, in key order."""
    merged = concat_aligned(data, schema)
    if merged is None:
        return None
    event_time = bool(spec.event_time_ordering and spec.ordering_field and spec.ordering_field in merged.column_names)
    sort_keys = [(_KEY, "ascending", "at_start")]
    if event_time:
        merged = merged.append_column(_ORD, merged.column(spec.ordering_field))
        sort_keys.append((_ORD, "ascending", "at_start"))  # a null ordering value loses
    sort_keys += [(_SEQ, "ascending", "at_start"), (_ROW, "ascending", "at_start")]
    order = pc.sort_indices(merged, sort_keys=sort_keys)
    keys = merged.column(_KEY).take(order).combine_chunks()
    if len(keys) > 1:
        last = pc.not_equal(keys.slice(0, len(keys) - 1), keys.slice(1))
        last = pa.concat_arrays([pc.fill_null(last, True), pa.array([True])])
        order = order.filter(last)  # each key's last row: one gather of the winners only
    winners = merged.take(order)
    if deletes:
        all_deletes = pa.concat_tables(deletes, promote_options="permissive")
        picked = payload_order_winners(merged, all_deletes) if event_time and spec.payload_delete_order else None
        if picked is None:
            winners = _apply_deletes(winners, all_deletes, event_time)
        else:  # keys Hudi 0.x orders differently: decided there, the rest as usual
            keys, rows = picked
            winners = winners.filter(pc.invert(pc.is_in(winners.column(_KEY), value_set=keys)))
            rest = all_deletes.filter(pc.invert(pc.is_in(all_deletes.column(_KEY), value_set=keys)))
            winners = pa.concat_tables([_apply_deletes(winners, rest, event_time), merged.take(rows)])
            winners = winners.take(pc.sort_indices(winners, [(_KEY, "ascending")]))
    return _finish(winners, drop)


def _tag_deletes(t: pa.Table, seq: int) -> pa.Table:
    n = len(t)
    ordv = t.column("ordering_value") if "ordering_value" in t.column_names else pa.nulls(n)
    if pa.types.is_null(ordv.type):  # Arrow joins cannot carry a null-typed column
        ordv = pa.nulls(n, pa.int64())
    return pa.table({
        _KEY: pc.cast(t.column(RECORD_KEY), pa.string()),
        "del_ord": ordv,
        "del_seq": pa.array(np.full(n, seq, dtype=np.int32)),
    })


def _apply_deletes(winners: pa.Table, deletes: pa.Table, event_time: bool) -> pa.Table:
    """Drop winners a delete beats: later in write order, or (event time, with a real
    ordering value) a higher ordering value / equal value written later. A delete whose
    ordering value is Hudi's default 0 (or null) means "natural order": write order."""
    if not len(deletes) or not len(winners):
        return winners
    # winners hold one row per key, so each delete names at most one of them: a hash
    # lookup (no join plan to build, which dominates at the sizes a slice sees)
    at = pc.index_in(deletes.column(_KEY), value_set=winners.column(_KEY).combine_chunks())
    hit = pc.is_valid(at)
    if not pc.any(hit).as_py():
        return winners
    deletes, at = deletes.filter(hit), at.filter(hit)
    later = pc.greater(deletes.column("del_seq"), winners.column(_SEQ).take(at))
    beats = later
    if event_time:
        rec = winners.column(_ORD).take(at)
        d = deletes.column("del_ord")
        try:
            d_cast = d.cast(rec.type) if not d.type.equals(rec.type) else d
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            d_cast = pa.nulls(len(deletes), rec.type)
        natural = pc.fill_null(pc.is_null(d_cast), True)
        with contextlib.suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError):
            natural = pc.or_(natural, pc.fill_null(pc.equal(d, pa.scalar(0, d.type)), False))
        higher = pc.fill_null(pc.greater(d_cast, rec), False)
        tie_later = pc.and_(pc.fill_null(pc.equal(d_cast, rec), False), later)
        beats = pc.if_else(natural, later, pc.or_(higher, tie_later))
    killed = at.filter(beats)
    if not len(killed):
        return winners
    keep = np.ones(len(winners), dtype=bool)
    keep[killed.to_numpy(zero_copy_only=False)] = False
    return winners.filter(pa.array(keep))

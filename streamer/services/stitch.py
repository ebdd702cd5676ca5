"""Stitch a run of log blocks into one: the record-level half of log compaction (RFC-48).

Unlike a snapshot merge there is no base file here, and deletes must *survive*: a key
deleted inside the run must still shadow the base file and older blocks after the run
is replaced. So the output is, per key, the run's final state under the reader's rules
(:mod:`streamer.table.merge`): either the winning row or the winning delete, never both.

Winning rows: sort by (key, [ordering value], position) and keep each key's last row.
Winning deletes: per key, the delete with the greatest ordering value (the one most
able to shadow rows outside the run). A delete then beats the key's winning row when
it is later in write order (no ordering value), or has a greater ordering value, or an
equal one and came later - exactly the reader's test. All vectorised: sorts and joins.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer.table import meta_fields
from streamer.table.log_content import ORDERING_VALUE
from streamer.table.merge import MergeSpec, concat_aligned, record_keys

_K, _S, _R, _O = "__st_key", "__st_seq", "__st_row", "__st_ord"


@dataclass(frozen=True)
class Stitched:
    """The run's final state: rows to keep and keys to keep deleted."""

    data: pa.Table | None
    deletes: pa.Table | None
    input_rows: int
    input_deletes: int


def _last_per_key(t: pa.Table, sort_keys: list[tuple[str, str]]) -> pa.Table:
    keys3 = [(name, order, "at_start") for name, order in sort_keys]
    t = t.take(pc.sort_indices(t, sort_keys=keys3))
    keys = t.column(_K).combine_chunks()
    n = len(keys)
    if n <= 1:
        return t
    last = pc.fill_null(pc.not_equal(keys.slice(0, n - 1), keys.slice(1)), True)
    return t.filter(pa.concat_arrays([last, pa.array([True])]))


def stitch(blocks: Sequence[tuple[str, pa.Table]], spec: MergeSpec) -> Stitched:
    """``blocks``: ``("data"|"delete", table)`` in reader order."""
    data_parts, del_parts = [], []
    n_rows = n_dels = 0
    for seq, (kind, t) in enumerate(blocks):
        n = len(t)
        if not n:
            continue
        tags = {_S: pa.array(np.full(n, seq, dtype=np.int32)), _R: pa.array(np.arange(n, dtype=np.int64))}
        if kind == "delete":
            n_dels += n
            keys = pc.cast(t.column(meta_fields.RECORD_KEY), pa.string())
            t = t.append_column(_K, keys)
            del_parts.append(t.append_column(_S, tags[_S]).append_column(_R, tags[_R]))
        else:
            n_rows += n
            t = t.append_column(_K, record_keys(t, spec))
            data_parts.append(t.append_column(_S, tags[_S]).append_column(_R, tags[_R]))
    data = concat_aligned(data_parts)
    event = bool(spec.event_time_ordering and spec.ordering_field and data is not None
                 and spec.ordering_field in data.column_names)
    if data is not None:
        if event:
            data = data.append_column(_O, data.column(spec.ordering_field))
        order = [(_K, "ascending")] + ([(_O, "ascending")] if event else []) + [(_S, "ascending"), (_R, "ascending")]
        data = _last_per_key(data, order)
    deletes = pa.concat_tables(del_parts, promote_options="permissive") if del_parts else None
    if deletes is not None:
        if ORDERING_VALUE not in deletes.column_names:
            deletes = deletes.append_column(ORDERING_VALUE, pa.nulls(len(deletes), pa.int32()))
        deletes = _last_per_key(deletes, [(_K, "ascending"), (ORDERING_VALUE, "ascending"), (_S, "ascending"),
                                          (_R, "ascending")])
    if data is not None and deletes is not None:
        data, deletes = _resolve(data, deletes, event)
    data = _drop_tags(data)
    deletes = _drop_tags(deletes)
    return Stitched(data if data is not None and len(data) else None,
                    deletes if deletes is not None and len(deletes) else None, n_rows, n_dels)


def _drop_tags(t: pa.Table | None) -> pa.Table | None:
    if t is None:
        return None
    return t.drop_columns([c for c in (_K, _S, _R, _O) if c in t.column_names])


def _natural(d: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A delete without a real ordering value (null, or Hudi's default 0) orders by write."""
    isnull = pc.is_null(d)
    try:
        zero = pc.fill_null(pc.equal(d, pa.scalar(0, d.type)), False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError):
        return isnull
    return pc.or_(isnull, zero)


def _resolve(data: pa.Table, deletes: pa.Table, event: bool) -> tuple[pa.Table, pa.Table]:
    """Keep, per key present in both, only the side that wins under the reader's rule."""
    probe = data.select([_K, _S] + ([_O] if event else []))
    dl = deletes.select([_K, _S, ORDERING_VALUE]).rename_columns([_K, "d_seq", "d_ord"])
    j = dl.join(probe, keys=_K, join_type="inner")
    if not len(j):
        return data, deletes
    later = pc.greater(j.column("d_seq"), j.column(_S))
    beats = later
    if event:
        rec, d = j.column(_O), j.column("d_ord")
        try:
            d_cast = d.cast(rec.type) if not d.type.equals(rec.type) else d
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            d_cast = pa.nulls(len(j), rec.type)
        higher = pc.fill_null(pc.greater(d_cast, rec), False)
        tie_later = pc.and_(pc.fill_null(pc.equal(d_cast, rec), False), later)
        beats = pc.if_else(_natural(d), later, pc.or_(higher, tie_later))
    killed = j.filter(beats).column(_K)
    kept_rows = j.filter(pc.invert(beats)).column(_K)
    data = data.filter(pc.invert(pc.is_in(data.column(_K), value_set=killed.combine_chunks())))
    deletes = deletes.filter(pc.invert(pc.is_in(deletes.column(_K), value_set=kept_rows.combine_chunks())))
    return data, deletes

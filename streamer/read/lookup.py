"""Rows by record key, reading only the file groups that may hold them.

What Hudi's read client offers as ``filterExists``/``read(keys)``: the footers the
writer's bloom index starts from (each slice's key ranges and bloom filters, of its base
file and its log blocks) name the file groups that may hold a key, and only those
groups' latest slices are read - with the keys as the read's filter, so a base file's
other rows are dropped as it is read - and merged, as a snapshot reads them. No key
column is read to decide: the merged read is what confirms a key (one deleted since
reads as absent).

Keys are record keys as the table stores them (``_hoodie_record_key``: the value for a
single key field, ``field:value,...`` for several). Without ``partitions`` a key is looked
for in every partition (the index is not global); with them, each key in its own.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from streamer import defaults
from streamer.index.bloom_index import may_hold
from streamer.index.slice_members import LookupStats, is_committed_fn
from streamer.read.slice_reader import read_file_slice
from streamer.table import meta_fields
from streamer.table.merge import concat_aligned

if TYPE_CHECKING:
    from streamer.read.table import Table
    from streamer.table.fsview import FileSlice


@dataclass(frozen=True)
class Lookup:
    """The rows found, and how much of the table was read for them."""

    rows: pa.Table
    #: file groups the index named (and that were read) / file groups in the table
    slices_read: int
    slices_total: int


def lookup(table: Table, keys: pa.Array | list, *, partitions: pa.Array | list | None = None,
           columns: list[str] | None = None) -> Lookup:
    """The snapshot rows of ``keys`` (see the module doc); ``columns`` as a read's."""
    keys_arr = pa.array(keys, pa.string()) if isinstance(keys, list) else keys.cast(pa.string())
    parts_arr = None
    if partitions is not None:
        parts_arr = pa.array(partitions, pa.string()) if isinstance(partitions, list) else partitions.cast(pa.string())
    wanted = None if columns is None else list(dict.fromkeys([meta_fields.RECORD_KEY, *columns]))
    if parts_arr is not None:
        wanted = None if wanted is None else list(dict.fromkeys([*wanted, meta_fields.PARTITION_PATH]))
    # the key filter goes into every slice read (row groups and rows of base files pruned)
    plan = table.plan("snapshot", columns=wanted, filter=pc.field(meta_fields.RECORD_KEY).isin(keys_arr))
    chosen = _candidate_slices(table, plan.slices, keys_arr, parts_arr)
    tables = [t for t in (read_file_slice(table.fs, s, plan.spec)[0] for s in chosen) if t is not None]
    rows = concat_aligned(tables)
    if rows is None:
        rows = table._empty(wanted)
    rows = rows.filter(pc.is_in(rows.column(meta_fields.RECORD_KEY), value_set=keys_arr))
    if parts_arr is not None:
        pairs = set(zip(keys_arr.to_pylist(), parts_arr.to_pylist(), strict=True))
        own = [(k, p) in pairs for k, p in zip(rows.column(meta_fields.RECORD_KEY).to_pylist(),
                                               rows.column(meta_fields.PARTITION_PATH).to_pylist(), strict=True)]
        rows = rows.filter(pa.array(own, pa.bool_()))
    if columns is not None:
        rows = rows.select([c for c in columns if c in rows.column_names])
    return Lookup(rows, len(chosen), len(plan.slices))


def _candidate_slices(table: Table, slices: list[FileSlice], keys: pa.Array,
                      partitions: pa.Array | None) -> list[FileSlice]:
    """The slices whose footers (key ranges and bloom filters of the base file and the log
    blocks) admit one of the keys meant for their partition: no key column is read."""
    tl = table.timeline
    completed = frozenset(i.timestamp for i in tl.completed())
    first = tl.instants[0].timestamp if tl.instants else None
    is_committed = is_committed_fn(completed, first)
    stats = LookupStats()

    def admits(s: FileSlice) -> bool:
        probe = keys if partitions is None else keys.filter(pc.equal(partitions, s.partition_path))
        if not len(probe):
            return False
        return may_hold(table.fs, s, probe, is_committed, stats)

    with ThreadPoolExecutor(defaults.LOCAL_THREADS, thread_name_prefix="lookup") as pool:
        keep = list(pool.map(admits, slices))
    return [s for s, k in zip(slices, keep, strict=True) if k]

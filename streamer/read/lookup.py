"""Rows by record key, reading only the file groups that may hold them.

What Hudi's read client offers as ``filterExists``/``read(keys)``: the bloom index the
writer uses (:class:`~streamer.index.bloom_index.BloomIndex`: slice footers, then member
footers, then the key column of the members left) names the file group holding each
key, and only those file groups' latest slices are read and merged, as a snapshot reads
them. A key found by the index but deleted since reads as absent, because the slice is
merged before the keys are picked.

Keys are record keys as the table stores them (``_hoodie_record_key``: the value for a
single key field, ``field:value,...`` for several). Without ``partitions`` a key is looked
for in every partition (the index is not global); with them, each key in its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from streamer import defaults
from streamer.index.bloom_index import BloomIndex
from streamer.index.slice_members import is_committed_fn
from streamer.read.slice_reader import read_file_slice
from streamer.table import meta_fields
from streamer.table.merge import concat_aligned

if TYPE_CHECKING:
    from streamer.read.table import Table


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
    wanted = None if columns is None else list(dict.fromkeys([meta_fields.RECORD_KEY, *columns]))
    plan = table.plan("snapshot", columns=wanted)
    slices = plan.slices
    tl = table.timeline
    completed = frozenset(i.timestamp for i in tl.completed())
    first = tl.instants[0].timestamp if tl.instants else None
    index = BloomIndex(table.fs, slices, is_committed_fn(completed, first), defaults.LOCAL_THREADS)
    if partitions is not None:
        parts_arr = pa.array(partitions, pa.string()) if isinstance(partitions, list) else partitions.cast(pa.string())
        probes = [(keys_arr, parts_arr)]
    else:
        n = len(keys_arr)
        probes = [(keys_arr, pa.array([p] * n, pa.string())) for p in sorted(index.by_partition)]
    groups: set[tuple[str, str]] = set()
    for probe_keys, probe_parts in probes:
        found = index.lookup(probe_keys, probe_parts)
        hit = pc.is_valid(found.file_ids)
        for part, file_id in zip(probe_parts.filter(hit).to_pylist(), found.file_ids.filter(hit).to_pylist(),
                                 strict=True):
            groups.add((part, file_id))
    chosen = [s for s in slices if (s.partition_path, s.file_id) in groups]
    tables = [t for t in (read_file_slice(table.fs, s, plan.spec)[0] for s in chosen) if t is not None]
    merged = concat_aligned(tables)
    if merged is None:
        merged = table._empty(wanted)
    rows = merged.filter(pc.is_in(merged.column(meta_fields.RECORD_KEY), value_set=keys_arr))
    if partitions is not None and meta_fields.PARTITION_PATH in rows.column_names:
        pairs = {(k, p) for k, p in zip(keys_arr.to_pylist(), parts_arr.to_pylist(), strict=True)}
        own = [(k, p) in pairs for k, p in zip(rows.column(meta_fields.RECORD_KEY).to_pylist(),
                                               rows.column(meta_fields.PARTITION_PATH).to_pylist(), strict=True)]
        rows = rows.filter(pa.array(own, pa.bool_()))
    if columns is not None:
        rows = rows.select([c for c in columns if c in rows.column_names])
    return Lookup(rows, len(chosen), len(slices))

"""The ordering value a table holds for keys: what a write compares an incoming row with
when the row cannot simply be merged by the readers.

A global index moves a row whose partition changed: it deletes the stored row in its old
file group and inserts the new one elsewhere. Readers merge each file group alone, so
the event-time rule (the greatest ordering value wins) can no longer decide between the
stored row and the incoming one: the write decides instead, and an incoming row older
than the stored one (a replay, or changes reordered) is dropped, as Hudi's global index
merges it with the stored record and keeps the stored one.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from streamer.fs import FileSystem
from streamer.index.slice_members import RECORD_KEY, slice_members
from streamer.table.fsview import FileSlice


def stored_ordering(fs: FileSystem, file_slice: FileSlice, keys: pa.Array, field: str,
                    is_committed: Callable[[str], bool]) -> pa.Array:
    """Per key of ``keys`` (live in ``file_slice``), the greatest ``field`` value among its
    committed versions there - the one an event-time merge of the slice serves (null
    when no version carries one). Only the key and ordering columns are read."""
    seen: list[pa.Table] = []
    for m in slice_members(fs, file_slice, is_committed):
        t = m.columns([RECORD_KEY, field])
        if field not in t.column_names:
            continue
        t = t.filter(pc.is_in(t.column(RECORD_KEY), value_set=keys))
        if t.num_rows:
            seen.append(t.select([RECORD_KEY, field]))
    if not seen:
        return pa.nulls(len(keys))
    rows = pa.concat_tables(seen, promote_options="permissive")
    best = rows.group_by(RECORD_KEY).aggregate([(field, "max")])
    at = pc.index_in(keys, value_set=best.column(RECORD_KEY))
    return best.column(f"{field}_max").take(at)

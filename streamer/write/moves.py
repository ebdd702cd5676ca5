"""The global index's routing: a key found in another partition than its row names.

With ``global_bloom`` a record key is unique across the table. Each key of the batch is
looked up in every partition, and a key stored elsewhere than the partition its row
computes is resolved here, before planning, as Hudi's global index does:

* a delete goes to the partition that holds the key (a CDC delete often carries the key
  alone, so its partition value is missing or stale);
* an update with ``update_partition_path`` (the default) becomes a delete of the stored
  row in its old file group - carrying the incoming ordering value, so the merge there
  lets it win - and an insert in the new partition; unless the stored row is newer by
  the ordering field (a replay), which keeps it and drops the incoming row;
* an update without it is written where the key is stored.

What comes out is an ordinary batch for :func:`~streamer.write.plan.build_plan`: rows
(the moves' deletes appended), their key columns, and the file id each row goes to.

With a per-partition index (``bloom``, ``bucket``) one case is routed too
(:func:`route_orphan_deletes`): a delete that carries no partition value (a Debezium
delete's ``before`` holds the primary key alone unless the table has ``REPLICA IDENTITY
FULL``) lands in the default partition, where its key is not stored - and would delete
nothing, without a word. It goes to every partition that holds its key instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer.index.bloom_index import BloomIndex
from streamer.index.ordering import stored_ordering
from streamer.index.slice_members import LookupStats
from streamer.table.fsview import FileSlice
from streamer.write.keygen import DEFAULT_PARTITION, PARTITION_PATH_COL, RECORD_KEY_COL
from streamer.write.prepare import IS_DELETE_COL, KEY_COLUMNS, latest_per_key
from streamer.write.tagging import PlanRequest


@dataclass(frozen=True)
class GlobalRouting:
    """A batch after the global lookup: rows and keys aligned with ``file_ids``."""

    rows: pa.Table
    keys: pa.Table
    file_ids: pa.Array
    lookup: LookupStats
    seeds: dict
    moved: int  # rows inserted in a new partition (their stored row deleted)
    stale: int  # incoming rows dropped: the stored row is newer


def route_global(rows: pa.Table, req: PlanRequest, ordering_field: str | None,
                 update_partition_path: bool) -> GlobalRouting:
    """Look ``rows``' keys up in every partition and resolve the ones stored elsewhere."""
    index = BloomIndex(req.fs, req.slices, req.is_committed, req.parallelism, on_corrupt=req.on_corrupt)
    res = index.lookup_global(rows.column(RECORD_KEY_COL))
    file_ids, found = res.file_ids, res.partitions
    assert found is not None
    parts = rows.column(PARTITION_PATH_COL).combine_chunks()
    elsewhere = pc.fill_null(pc.not_equal(found, parts), False).to_numpy(zero_copy_only=False)
    if not elsewhere.any():
        return GlobalRouting(rows, rows.select(list(KEY_COLUMNS)), file_ids, res.stats, index.slice_seeds, 0, 0)
    is_delete = pc.fill_null(rows.column(IS_DELETE_COL).combine_chunks(), False).to_numpy(zero_copy_only=False)
    movers = elsewhere & ~is_delete if update_partition_path else np.zeros(len(parts), dtype=bool)
    stay = elsewhere & ~movers  # deletes, and updates kept where they are stored
    parts = pc.if_else(pa.array(stay), found, parts)
    rows = rows.set_column(rows.schema.get_field_index(PARTITION_PATH_COL), PARTITION_PATH_COL, parts)
    stale = np.zeros(len(parts), dtype=bool)
    if movers.any() and ordering_field is not None:
        stale = _stale(rows, movers, file_ids, req, ordering_field)
        movers &= ~stale
    moved_rows = np.flatnonzero(movers)
    deletes = rows.take(pa.array(moved_rows))
    deletes = deletes.set_column(deletes.schema.get_field_index(PARTITION_PATH_COL), PARTITION_PATH_COL,
                                 found.take(pa.array(moved_rows)))
    deletes = deletes.set_column(deletes.schema.get_field_index(IS_DELETE_COL), IS_DELETE_COL,
                                 pa.array(np.ones(len(moved_rows), dtype=bool)))
    delete_fids = file_ids.take(pa.array(moved_rows))
    file_ids = pc.if_else(pa.array(movers), pa.nulls(len(parts), pa.string()), file_ids)
    keep = pa.array(~stale)
    rows = pa.concat_tables([rows.filter(keep), deletes])
    file_ids = pa.concat_arrays([file_ids.filter(keep), delete_fids])
    return GlobalRouting(rows, rows.select(list(KEY_COLUMNS)), file_ids, res.stats, index.slice_seeds,
                         len(moved_rows), int(stale.sum()))


def _stale(rows: pa.Table, movers: np.ndarray, file_ids: pa.Array, req: PlanRequest,
           ordering_field: str) -> np.ndarray:
    """Bool per row: a mover whose stored row has a greater ordering value (ties go to the
    incoming row, as in a merge)."""
    out = np.zeros(len(movers), dtype=bool)
    by_id: dict[str, FileSlice] = {s.file_id: s for s in req.slices}
    idx = np.flatnonzero(movers)
    fids = file_ids.take(pa.array(idx))
    for fid in pc.unique(fids).to_pylist():
        at = idx[pc.equal(fids, fid).to_numpy(zero_copy_only=False)]
        keys = rows.column(RECORD_KEY_COL).take(pa.array(at)).combine_chunks()
        stored = stored_ordering(req.fs, by_id[fid], keys, ordering_field, req.is_committed)
        incoming = rows.column(ordering_field).take(pa.array(at)).combine_chunks()
        if stored.type != incoming.type:
            stored = stored.cast(incoming.type)
        newer = pc.fill_null(pc.greater(stored, incoming), False).to_numpy(zero_copy_only=False)
        out[at[newer]] = True
    return out


@dataclass(frozen=True)
class OrphanDeletes:
    """A batch after its deletes without a partition value were sent where their keys are."""

    rows: pa.Table
    #: the keys of the deletes sent to other partitions (one per delete, before copies)
    sent: pa.Array


def route_orphan_deletes(rows: pa.Table, req: PlanRequest) -> OrphanDeletes | None:
    """``rows`` with each delete whose partition value is missing (its partition path names
    the default partition) and whose key the default partition does not hold sent to every
    partition that does hold it. ``None``: no delete was sent (the usual case, where no
    delete names the default partition, costs one pass over the delete flags).

    A delete found in the default partition stays there: a null partition value may be
    the row's real one. One found nowhere is left as it was (deleting an absent key is a
    no-op, as any replayed delete is).
    """
    is_delete = pc.fill_null(rows.column(IS_DELETE_COL).combine_chunks(), False)
    if not pc.any(is_delete).as_py():
        return None
    deletes = np.flatnonzero(is_delete.to_numpy(zero_copy_only=False))
    parts = rows.column(PARTITION_PATH_COL).combine_chunks()
    in_default = pc.match_substring(parts.take(pa.array(deletes)).cast(pa.string()), DEFAULT_PARTITION)
    candidates = deletes[pc.fill_null(in_default, False).to_numpy(zero_copy_only=False)]
    if not len(candidates):
        return None
    index = BloomIndex(req.fs, req.slices, req.is_committed, req.parallelism, on_corrupt=req.on_corrupt)
    keys = rows.column(RECORD_KEY_COL).take(pa.array(candidates)).combine_chunks()
    stored_here = index.lookup(keys, parts.take(pa.array(candidates))).is_update().to_numpy(zero_copy_only=False)
    orphans = candidates[~stored_here]
    if not len(orphans):
        return None
    holders, _ = index.holders(rows.column(RECORD_KEY_COL).take(pa.array(orphans)))
    if not holders:
        return None
    # each sent delete gets, where it stood, one copy per partition holding its key: the
    # batch's order stays, so ties of the ordering value still go to the later row
    sent = np.zeros(len(orphans), dtype=bool)
    for _, at in holders:
        sent[at] = True
    # the delete also stays where it stood: there it deletes nothing stored, but it still
    # supersedes a row of its key the batch has in the default partition (an upsert before
    # it), which an engine that combines after routing (Spark's tasks) would write otherwise
    kept = np.arange(rows.num_rows)
    index_parts = [kept] + [orphans[at] for _, at in holders]
    new_parts = [pa.nulls(len(kept), pa.string())] + [pa.array([p] * len(at), pa.string()) for p, at in holders]
    order = np.argsort(np.concatenate(index_parts), kind="stable")
    taken = np.concatenate(index_parts)[order]
    override = pa.concat_arrays(new_parts).take(pa.array(order))
    out = rows.take(pa.array(taken))
    column = out.column(PARTITION_PATH_COL).combine_chunks()
    column = pc.if_else(pc.is_null(override), column.cast(pa.string()), override).cast(column.type)
    out = out.set_column(out.schema.get_field_index(PARTITION_PATH_COL), PARTITION_PATH_COL, column)
    # a copy may meet a row of the batch with the same key in that partition (an update,
    # then the delete): one row per key and partition, the later by the ordering field, as
    # the upsert's own combining had made it (upserts and deletes are always combined)
    out = latest_per_key(out, req.ordering_field if req.ordering_field in out.column_names else None)
    return OrphanDeletes(out, rows.column(RECORD_KEY_COL).take(pa.array(orphans[sent])))

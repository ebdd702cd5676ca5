"""A batch of Debezium changes never ends between a primary-key change's delete and its create.

Debezium's Postgres connector sends a primary-key change as a delete of the old key, its
tombstone, then a create of the new key, one after another in the topic partition. The
create carries the values the update left alone (a TOASTed text) as Debezium's
placeholder, and those values are the old key's (:mod:`streamer.pipeline.unavailable`).
When a batch ends just after the delete, the create comes in the next batch, which reads
the old row from the table as it stood before the delete
(:mod:`streamer.pipeline.key_changes`). That row exists only if an earlier batch
committed it. When the batch that ends with the delete also inserted or changed the old
key, it merges that key's changes into the net delete, so the old row is in no commit.
The create could then not be completed, and the new key went to the error table instead
of the table.

So that tail is held back. Per Kafka partition, the batch's trailing deletes (nothing
but deletes and tombstones after them) are left to the next batch from the first one
whose key has an earlier change in the batch, and the batch commits the position of that
delete. The next batch starts with those deletes, followed by the create once Debezium
has published it, and the old key's row is then in the table. The next batch cannot
hold back from the same place again (no change of those keys comes before the deletes
in it), so a run always moves on. A trailing delete of a key the batch did not change
otherwise is written at once: its row is in an earlier commit, and so is one whose create
the batch has (at the same position, in another partition): nothing waits for it
(:func:`paired_deletes`). A ``trigger.mode: once``
run reads the held records in one more batch
(:meth:`~streamer.pipeline.runner.PipelineRunner.run_trigger_once`).

A topic of several partitions has a second case: Debezium keys each record by its
primary key, so a key change's delete and create usually land in different partitions,
and a batch capped by ``max_records_per_batch`` can read the create without the delete
(the cap shares the batch among the partitions by their backlog). Such a create cannot be
completed from the batch nor from the table's commits. When the batch's cap left records
unread in another partition (``Batch.behind``), where the delete may be, the create's
partition is held back from it (:func:`creates_held`): the next batch reads further
there. A batch that read every other partition up to where it could is not held: its
create goes to the error table, naming the column and key, so a delete that never comes
cannot stop the partition. A ``trigger.mode: once`` run leaves such a create to the next
run (:attr:`~streamer.pipeline.batch.PreparedBatch.read_again`).

The other way round, a batch can read a key change's delete without its create. Its
create, in a later batch, takes the old key's values from the commit before the one that
deleted it (:mod:`streamer.pipeline.key_changes`). When the same batch also changed the
old key, that change is merged into the net delete and reaches no commit, so the create
would take the key's older values, with no error. So while the create may still come
(the batch's cap left records unread, or it holds records back), such a delete, the last
change of a key the batch changed before and with no create at its position in the
batch, is committed on its own, in a second commit right after the batch's
(:func:`deferred_deletes`; :attr:`~streamer.pipeline.batch.PreparedBatch.deferred`). The
first commit's position is the delete's, so a crash between the two reads it again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer.sources.position import KafkaOffsets, Position

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Offset to hold back from, per Kafka partition.
Holds = dict[int, int]


def holds_of(partitions: pa.Array, offsets: pa.Array, deleted: pa.Array, keys: pa.Array,
             paired: pa.Array | None = None) -> Holds:
    """Where each partition's held-back tail starts (module doc): the rows' Kafka
    partitions and offsets, delete flags and record keys, in any order. ``paired``
    marks the deletes whose key change's create the batch has (:func:`paired_deletes`):
    nothing waits for them."""
    if not len(keys):
        return {}
    part = pc.fill_null(partitions, -1).to_numpy(zero_copy_only=False)
    off = pc.fill_null(offsets, -1).to_numpy(zero_copy_only=False)
    is_delete = pc.fill_null(deleted, False).to_numpy(zero_copy_only=False).astype(bool)
    if paired is not None:
        is_delete &= ~pc.fill_null(paired, False).to_numpy(zero_copy_only=False).astype(bool)
    out: Holds = {}
    for p in np.unique(part[part >= 0]):  # a loop over the batch's partitions, not its rows
        changes = (part == p) & ~is_delete
        if not changes.any():
            continue
        tail = (part == p) & is_delete & (off > off[changes].max())
        if not tail.any():
            continue
        changed = pc.is_in(keys.filter(pa.array(tail)), value_set=keys.filter(pa.array(changes)))
        at = off[tail][changed.to_numpy(zero_copy_only=False)]
        if len(at):
            out[int(p)] = int(at.min())
    return out


def paired_deletes(deleted: pa.Array, positions: pa.Array, operations: pa.Array) -> pa.Array:
    """Which rows are deletes at the position (ordering value) of a create in the same
    rows: a key change whose create the batch has, in whatever partition."""
    created = positions.filter(pc.fill_null(pc.equal(operations, "c"), False))
    return pc.and_(pc.fill_null(deleted, False), pc.fill_null(pc.is_in(positions, value_set=created), False))


def deferred_deletes(keys: pa.Array, offsets: pa.Array, deleted: pa.Array, paired: pa.Array | None) -> pa.Array:
    """Which rows are deletes committed after the batch's other rows (module doc): the
    last change of its key in the batch (rows in any order; a key's changes share one
    partition), that key changed before it in the batch, and no create of the batch at its
    position (``paired``, :func:`paired_deletes`)."""
    is_delete = pc.fill_null(deleted, False)
    if paired is not None:
        is_delete = pc.and_(is_delete, pc.invert(pc.fill_null(paired, False)))
    frame = pa.table({"k": keys, "o": offsets, "c": pc.if_else(pc.fill_null(deleted, False), None, offsets)})
    per_key = frame.group_by("k").aggregate([("o", "max"), ("c", "min")])
    at = pc.index_in(keys, value_set=per_key.column("k"))
    last, first_change = per_key.column("o_max").take(at), per_key.column("c_min").take(at)
    own = pc.and_(pc.equal(offsets, last), pc.less(first_change, offsets))
    return pc.and_(is_delete, pc.fill_null(own, False))


def deferred_on_spark(rows: DataFrame, offset: str, deleted: str, keys: list[str],
                      pairing: tuple[str, str] | None) -> DataFrame:
    """:func:`deferred_deletes` over a batch written by Spark: those rows."""
    from pyspark.sql import functions as F

    is_delete = F.coalesce(F.col(deleted), F.lit(False))
    per_key = rows.groupBy(*keys).agg(F.max(offset).alias("_last"),
                                      F.min(F.when(~is_delete, F.col(offset))).alias("_first_change"))
    out = (rows.where(is_delete).join(per_key, keys)
           .where((F.col(offset) == F.col("_last")) & (F.col("_first_change") < F.col(offset)))
           .drop("_last", "_first_change"))
    if pairing is not None:
        ordering, operation = pairing
        out = out.join(rows.where(F.col(operation) == "c").select(ordering).distinct(), ordering, "left_anti")
    return out


def creates_held(incomplete: pa.Table, partition: str, offset: str, operation: str, behind: frozenset[int],
                 deleted_at: Callable[[list[Any]], set[Any]] | None = None, ordering: str | None = None) -> Holds:
    """Where each partition holds back the creates among ``incomplete`` (rows whose
    unchanged values could not be completed) whose delete may be in the records the
    batch's cap left unread in another partition, ``behind`` (module doc).

    Waiting helps only a create whose delete is not in the batch: ``deleted_at`` gives,
    of the creates' positions (``ordering`` values), those a delete of the batch has. And
    it helps only while another partition can move on: one that is behind and holds no
    create of its own, so two partitions never wait for each other (Debezium writes each
    partition in log order, so a create's delete always comes before the other
    partition's later creates)."""
    if not behind or not incomplete.num_rows or not {partition, offset, operation} <= set(incomplete.column_names):
        return {}
    creates = incomplete.filter(pc.fill_null(pc.equal(incomplete.column(operation), "c"), False))
    found = creates.column(ordering).to_pylist() if ordering in creates.column_names else [None] * creates.num_rows
    paired = deleted_at([v for v in found if v is not None]) if deleted_at is not None and any(v is not None for v in found) else set()
    waiting: Holds = {}  # the creates are few: the rows left incomplete
    for p, o, at in zip(creates.column(partition).to_pylist(), creates.column(offset).to_pylist(), found, strict=True):
        if p is not None and o is not None and (at is None or at not in paired) and behind - {p}:
            waiting[int(p)] = min(int(o), waiting.get(int(p), int(o)))
    moving = behind - set(waiting)
    return {p: o for p, o in waiting.items() if moving - {p}}


def merged(a: Holds, b: Holds) -> Holds:
    """Both holds: the earlier offset where a partition has two."""
    return {p: min(a.get(p, o), b.get(p, o)) for p, o in {**a, **b}.items()}


def holds_on_spark(rows: DataFrame, partition: str, offset: str, deleted: str, keys: list[str],
                   pairing: tuple[str, str] | None = None) -> Holds:
    """:func:`holds_of` over a batch written by Spark (one small job: the tails are few
    rows); ``pairing``: the ordering and operation columns, to leave out the deletes
    :func:`paired_deletes` finds."""
    from pyspark.sql import functions as F

    changes = rows.where(~F.coalesce(F.col(deleted), F.lit(False)))
    last = changes.groupBy(partition).agg(F.max(offset).alias("_last"))
    tail = (rows.where(F.coalesce(F.col(deleted), F.lit(False)))
            .join(F.broadcast(last), partition).where(F.col(offset) > F.col("_last")))
    if pairing is not None:
        ordering, operation = pairing
        created = rows.where(F.col(operation) == "c").select(ordering).distinct()
        tail = tail.join(created, ordering, "left_anti")
    changed = tail.join(changes.select(*keys).distinct(), keys, "left_semi")
    return {int(r[0]): int(r[1]) for r in changed.groupBy(partition).agg(F.min(offset)).collect()}


def kept(rows: pa.Table, holds: Holds, partition: str, offset: str) -> pa.Table:
    """``rows`` without those at or after their partition's hold."""
    if not holds or not rows.num_rows:
        return rows
    parts = rows.column(partition).combine_chunks()
    limit = pc.fill_null(pc.take(pa.array(list(holds.values()), pa.int64()),
                                 pc.index_in(parts, value_set=pa.array(list(holds), parts.type))),
                         np.iinfo(np.int64).max)
    return rows.filter(pc.fill_null(pc.less(rows.column(offset), limit), True))


def held_end(end: Position, holds: Holds) -> Position:
    """The position a batch that held ``holds`` back commits (``end`` when none)."""
    if not holds or not isinstance(end, KafkaOffsets):
        return end
    return KafkaOffsets(topic=end.topic, partitions={p: min(o, holds.get(p, o)) for p, o in end.partitions.items()})


def records_held(end: Position, holds: Holds) -> int:
    """Offsets a batch leaves to the next one by holding ``holds`` back."""
    if not holds or not isinstance(end, KafkaOffsets):
        return 0
    return sum(max(0, o - holds[p]) for p, o in end.partitions.items() if p in holds)


def kept_on_spark(rows: DataFrame, holds: Holds, partition: str, offset: str) -> DataFrame:
    """:func:`kept` for a batch written by Spark."""
    from functools import reduce

    from pyspark.sql import functions as F

    if not holds:
        return rows
    held = reduce(lambda a, b: a | b, [(F.col(partition) == p) & (F.col(offset) >= o) for p, o in holds.items()])
    return rows.where(~F.coalesce(held, F.lit(False)))

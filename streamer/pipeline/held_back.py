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
there. Only while the delete can still be there: not once that partition was read past
the create's send time (Debezium's ``ts_ms``), nor when the batch has the delete. A batch
that read every other partition up to where it could is not held: its create goes to the
error table, naming the column and key, so a delete that never comes cannot stop the
partition. A ``trigger.mode: once`` run leaves such a create to the next
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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamer.sources.position import KafkaOffsets, Position
from streamer.table.meta_fields import IS_DELETED

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Offset to hold back from, per Kafka partition.
Holds = dict[int, int]


@dataclass(frozen=True)
class Deferred:
    """The deletes a batch commits after its other rows."""

    #: The rows (Arrow, or a Spark DataFrame for the Spark engine), as ``good``'s columns.
    rows: Any
    count: int
    #: Per Kafka partition, the first deferred delete's offset: the first commit's position there.
    at: Holds

    def keeping(self, rows: Any, count: int | None) -> Deferred | None:
        """These deletes but only ``rows`` of them (``count``; None: Arrow's count), None
        when none is left. ``at`` stays: an earlier first position only reads more again
        after a crash between the two commits."""
        n = rows.num_rows if count is None else count
        return Deferred(rows, n, self.at) if n else None


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


@dataclass(frozen=True)
class WaitingCreate:
    """A key change's create the batch could not complete (:func:`creates_held`)."""

    partition: int
    offset: int
    #: Its log position (the ordering value), which its delete shares.
    position: Any
    #: When the connector sent it (Debezium's ``ts_ms``), if known.
    sent: Any


@dataclass(frozen=True)
class BatchView:
    """What :func:`creates_held` asks of the batch."""

    #: ``Batch.behind``: partitions the batch's cap left records unread in.
    behind: frozenset[int]
    #: Each partition's first offset in the batch.
    start: dict[int, int]
    #: Of some log positions, those a delete of the batch has, outside the given holds.
    deleted_at: Callable[[list[Any], Holds], set[Any]]
    #: Per partition, the latest ``ts_ms`` among the batch's records up to the given holds.
    sent_until: Callable[[Holds], dict[int, Any]]


def creates_held(creates: list[WaitingCreate], view: BatchView) -> Holds:
    """Where each partition holds back the creates the batch could not complete (module
    doc): a create waits for its delete in another partition whose records the batch did
    not read, left by the cap or held back itself, and only where the delete can still be:

    - a create whose delete the batch has (outside what it holds back) has nothing to wait
      for: its old row is nowhere;
    - Debezium's connector sends records in log order with a clock (``ts_ms``), so the
      delete, sent with its create, precedes in its partition every record sent after the
      create: a partition the batch read a later record of has no such delete unread;
    - a partition waited for must move on in this batch, or wait itself for one that
      does: partitions waiting only for each other are not held.

    Holding one create removes the deletes after it from the batch, so a create whose old
    key is that one's new key waits with it: this is worked out to a fixed point (a few
    rounds: the creates are few, the rows left incomplete)."""
    holds: Holds = {}
    for _ in range(len(creates) + 1):
        waiting = _waiting(creates, view, holds)
        if waiting == holds:
            break
        holds = waiting
    return holds


def _waiting(creates: list[WaitingCreate], view: BatchView, holds: Holds) -> Holds:
    """One round of :func:`creates_held`, given the holds of the last."""
    paired = view.deleted_at([c.position for c in creates if c.position is not None], holds)
    sent_until = view.sent_until(holds)
    unread = view.behind | set(holds)
    waits: dict[int, set[int]] = {}  # partition of a create -> partitions its delete may be in
    first: Holds = {}
    for c in creates:
        if c.position is not None and c.position in paired:
            continue
        may = {q for q in unread if q != c.partition
               and (c.sent is None or sent_until.get(q) is None or sent_until[q] <= c.sent)}
        if may:
            waits.setdefault(c.partition, set()).update(may)
            first[c.partition] = min(c.offset, first.get(c.partition, c.offset))
    # partitions that move on: behind and not held from their start
    alive = {q for q in view.behind if q not in first or first[q] > view.start.get(q, -1)}
    for _ in range(len(first)):
        grown = alive | {p for p, qs in waits.items() if qs & alive}
        if grown == alive:
            break
        alive = grown
    return {p: o for p, o in first.items() if waits[p] & alive}


#: The column of Debezium's ``ts_ms``: when the connector sent the record.
SENT = "_upstream_event_processed_ts_ms"


def waiting_creates(incomplete: pa.Table, partition: str, offset: str, operation: str,
                    ordering: str | None) -> list[WaitingCreate]:
    """The creates among ``incomplete`` (rows left incomplete), for :func:`creates_held`."""
    if not incomplete.num_rows or not {partition, offset, operation} <= set(incomplete.column_names):
        return []
    creates = incomplete.filter(pc.fill_null(pc.equal(incomplete.column(operation), "c"), False))

    def values(name: str | None) -> list[Any]:
        return creates.column(name).to_pylist() if name in creates.column_names else [None] * creates.num_rows

    return [WaitingCreate(int(p), int(o), at, sent) for p, o, at, sent in zip(
        values(partition), values(offset), values(ordering), values(SENT), strict=True) if p is not None and o is not None]


def local_view(rows: pa.Table, partition: str, offset: str, ordering: str | None, behind: frozenset[int],
               start: dict[int, int]) -> BatchView:
    """:class:`BatchView` of a batch's rows on the driver (deletes flagged :data:`IS_DELETED`)."""

    def deleted_at(positions: list[Any], holds: Holds) -> set[Any]:
        if ordering is None or ordering not in rows.column_names:
            return set()
        there = kept(rows, holds, partition, offset)
        found = pc.and_(pc.fill_null(there.column(IS_DELETED), False),
                        pc.is_in(there.column(ordering), value_set=pa.array(positions, there.schema.field(ordering).type)))
        return set(there.column(ordering).filter(pc.fill_null(found, False)).to_pylist())

    def sent_until(holds: Holds) -> dict[int, Any]:
        if SENT not in rows.column_names:
            return {}
        latest = kept(rows, _through(holds), partition, offset).group_by(partition).aggregate([(SENT, "max")])
        return dict(zip(latest.column(partition).to_pylist(), latest.column(f"{SENT}_max").to_pylist(), strict=True))

    return BatchView(behind, start, deleted_at, sent_until)


def spark_view(rows: DataFrame, partition: str, offset: str, ordering: str | None, behind: frozenset[int],
               start: dict[int, int]) -> BatchView:
    """:func:`local_view` of a batch written by Spark (a small job per question: asked
    only when creates were left incomplete)."""
    from pyspark.sql import functions as F

    def deleted_at(positions: list[Any], holds: Holds) -> set[Any]:
        if ordering is None or not {ordering, IS_DELETED} <= set(rows.columns):
            return set()
        there = kept_on_spark(rows, holds, partition, offset)
        found = there.where(F.col(IS_DELETED) & F.col(ordering).isin(positions)).select(ordering).distinct()
        return {r[0] for r in found.collect()}

    def sent_until(holds: Holds) -> dict[int, Any]:
        if SENT not in rows.columns:
            return {}
        latest = kept_on_spark(rows, _through(holds), partition, offset).groupBy(partition).agg(F.max(SENT))
        return {int(r[0]): r[1] for r in latest.collect()}

    return BatchView(behind, start, deleted_at, sent_until)


def _through(holds: Holds) -> Holds:
    """``holds`` one record later: what a held partition has read for sure includes the
    held create itself, sent after everything before it there."""
    return {p: o + 1 for p, o in holds.items()}


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

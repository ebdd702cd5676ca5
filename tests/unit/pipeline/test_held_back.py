"""Where a Debezium batch leaves its tail to the next batch: only a trailing delete of a key
the same batch changed before, per Kafka partition, and from the first such delete; and a
key change's create read before its delete, while the batch's cap left records unread."""

from __future__ import annotations

import pyarrow as pa

from streamer.pipeline.held_back import (
    SENT,
    creates_held,
    deferred_deletes,
    held_end,
    holds_of,
    kept,
    local_view,
    paired_deletes,
    records_held,
    waiting_creates,
)
from streamer.sources.position import KafkaOffsets
from streamer.table.meta_fields import IS_DELETED


def _holds(*rows: tuple[int, int, bool, str]) -> dict[int, int]:
    part, off, deleted, keys = zip(*rows, strict=True)
    return holds_of(pa.array(part, pa.int32()), pa.array(off, pa.int64()), pa.array(deleted), pa.array(keys))


def test_a_key_changes_delete_at_the_end_of_a_batch_that_inserted_the_old_key_is_held_back():
    # 7 inserted then renamed (delete, tombstone at 3 not a row); 1 updated
    assert _holds((0, 0, False, "1"), (0, 1, False, "7"), (0, 2, True, "7")) == {0: 2}


def test_a_trailing_delete_of_a_key_the_batch_did_not_change_before_is_written():
    assert _holds((0, 0, False, "1"), (0, 1, True, "7")) == {}
    # a delete followed by a change is not trailing, whatever its key
    assert _holds((0, 0, False, "7"), (0, 1, True, "7"), (0, 2, False, "1")) == {}
    # a batch of deletes only (the held tail, read again) moves on
    assert _holds((0, 2, True, "7"), (0, 3, True, "8")) == {}


def test_the_tail_is_held_from_the_first_delete_of_a_changed_key_per_partition():
    rows = [(0, 0, False, "7"), (0, 1, False, "8"), (0, 2, True, "9"), (0, 3, True, "8"), (0, 4, True, "7"),
            (1, 0, False, "a"), (1, 1, True, "b"),   # partition 1: b not changed before: written
            (2, 5, True, "c"), (2, 9, False, "c")]   # partition 2: no trailing delete
    assert _holds(*rows) == {0: 3}


def test_held_rows_positions_and_counts():
    holds = {0: 3}
    rows = pa.table({"p": pa.array([0, 0, 0, 1, None], pa.int32()), "o": pa.array([2, 3, 4, 9, None], pa.int64())})
    assert kept(rows, holds, "p", "o").to_pydict() == {"p": [0, 1, None], "o": [2, 9, None]}
    end = KafkaOffsets(topic="t", partitions={0: 5, 1: 10})
    assert held_end(end, holds) == KafkaOffsets(topic="t", partitions={0: 3, 1: 10})
    assert records_held(end, holds) == 2
    assert held_end(end, {}) is end and records_held(end, {}) == 0


def test_a_trailing_delete_whose_create_the_batch_has_in_another_partition_is_written():
    """On several partitions a key change's create may come before its delete in the
    batch: nothing waits for that delete, and holding it back would leave the create
    without it."""
    deleted, lsn, op = pa.array([False, True, False]), pa.array([10, 30, 30]), pa.array(["c", "d", "c"])
    paired = paired_deletes(deleted, lsn, op)
    assert paired.to_pylist() == [False, True, False]
    part, off, keys = pa.array([0, 0, 1], pa.int32()), pa.array([0, 1, 0], pa.int64()), pa.array(["7", "7", "8"])
    assert holds_of(part, off, deleted, keys) == {0: 1}
    assert holds_of(part, off, deleted, keys, paired) == {}


def _batch(*rows: tuple[int, int, str, int, int]) -> pa.Table:
    """A batch's rows: (partition, offset, op, log position, Debezium's ts_ms)."""
    part, off, op, lsn, sent = zip(*rows, strict=True)
    return pa.table({"p": pa.array(part, pa.int32()), "o": pa.array(off, pa.int64()), "op": list(op),
                     "lsn": pa.array(lsn, pa.int64()), IS_DELETED: [o == "d" for o in op],
                     SENT: pa.array(sent, pa.int64())})


def _held(rows: pa.Table, incomplete: list[int], behind: set[int], start: dict[int, int]) -> dict[int, int]:
    """The holds for the creates at positions ``incomplete`` (indexes into ``rows``)."""
    view = local_view(rows, "p", "o", "lsn", frozenset(behind), start)
    return creates_held(waiting_creates(rows.take(incomplete), "p", "o", "op", "lsn"), view)


def test_a_create_not_completed_waits_while_another_partition_may_hold_its_delete():
    # x's create (partition 1) after partition 0 read up to a record sent before it
    rows = _batch((0, 0, "c", 10, 100), (1, 3, "c", 60, 600))
    assert _held(rows, [1], {0}, {0: 0, 1: 3}) == {1: 3}
    assert _held(rows, [1], {1}, {0: 0, 1: 3}) == {}  # nothing left unread elsewhere: the error table
    # partition 0 read a record sent after the create: its delete, sent before, is not there
    later = _batch((0, 0, "c", 10, 100), (0, 1, "c", 70, 700), (1, 3, "c", 60, 600))
    assert _held(later, [2], {0}, {0: 0, 1: 3}) == {}
    # its delete is in the batch: waiting cannot complete it
    paired = _batch((0, 0, "d", 60, 600), (1, 3, "c", 60, 600))
    assert _held(paired, [1], {0}, {0: 0, 1: 3}) == {}


def test_the_deletes_committed_on_their_own_are_the_net_deletes_of_keys_changed_before():
    keys = pa.array(["7", "7", "8", "9", "9", "9", "5", "5"])
    offsets = pa.array([0, 2, 3, 4, 5, 6, 7, 8], pa.int64())
    deleted = pa.array([False, True, True, False, True, False, False, True])
    # 7: changed, then deleted: its delete; 8: a delete alone; 9: deleted, then inserted
    # again (no net delete); 5: changed, then deleted at a create's position (paired)
    paired = pa.array([False] * 7 + [True])
    assert deferred_deletes(keys, offsets, deleted, paired).to_pylist() == [
        False, True, False, False, False, False, False, False]
    assert deferred_deletes(keys, offsets, deleted, None).to_pylist()[-1] is True


def test_creates_waiting_only_for_each_other_are_not_held_and_a_later_one_waits_for_an_earlier_one():
    """Two partitions held from their start, each waiting for the other, never move: their
    creates go to the error table. Of two creates in two partitions, only the later sent
    can be waiting for the other's unread records (Debezium sends in log order)."""
    both = _batch((0, 0, "c", 60, 600), (1, 0, "c", 61, 600))
    assert _held(both, [0, 1], {0, 1}, {0: 0, 1: 0}) == {}
    assert _held(both, [0, 1], {0, 1, 2}, {0: 0, 1: 0}) == {0: 0, 1: 0}  # partition 2 moves on
    rows = _batch((0, 0, "c", 10, 100), (0, 5, "c", 60, 600), (1, 0, "c", 50, 500))
    assert _held(rows, [1, 2], {0, 1}, {0: 0, 1: 0}) == {0: 5}


def test_a_create_whose_old_key_is_a_held_creates_new_key_waits_with_it():
    """x's create waits in partition 0, and with it the delete of x after it (x renamed to
    w): w's create, paired with that delete before, waits too."""
    rows = _batch((0, 2, "c", 60, 600), (0, 3, "d", 70, 700), (1, 0, "c", 5, 50), (2, 0, "c", 70, 700))
    assert _held(rows, [0, 3], {1}, {0: 2, 1: 0, 2: 0}) == {0: 2, 2: 0}

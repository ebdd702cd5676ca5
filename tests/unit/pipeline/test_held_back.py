"""Where a Debezium batch leaves its tail to the next batch: only a trailing delete of a key
the same batch changed before, per Kafka partition, and from the first such delete; and a
key change's create read before its delete, while the batch's cap left records unread."""

from __future__ import annotations

import pyarrow as pa

from streamer.pipeline.held_back import (
    creates_held,
    deferred_deletes,
    held_end,
    holds_of,
    kept,
    merged,
    paired_deletes,
    records_held,
)
from streamer.sources.position import KafkaOffsets


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


def test_a_create_not_completed_waits_only_while_another_partition_was_left_unread():
    incomplete = pa.table({"p": pa.array([1, 1, 2, 0], pa.int32()), "o": pa.array([5, 3, 7, 4], pa.int64()),
                           "op": ["c", "c", "u", "c"]})
    # partition 0 behind: partition 1's creates wait from the first; partition 0's own create
    # cannot have its delete in partition 0's unread records (the delete comes first there)
    assert creates_held(incomplete, "p", "o", "op", frozenset({0})) == {1: 3}
    assert creates_held(incomplete, "p", "o", "op", frozenset({0, 1, 2})) == {1: 3, 0: 4}
    assert creates_held(incomplete, "p", "o", "op", frozenset({0, 1})) == {}  # each would wait for the other
    assert creates_held(incomplete, "p", "o", "op", frozenset()) == {}  # nothing unread: the error table
    assert merged({0: 4, 1: 9}, {1: 3, 2: 1}) == {0: 4, 1: 3, 2: 1}


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


def test_a_create_whose_delete_the_batch_has_or_whose_partners_wait_too_is_not_held():
    """Waiting cannot complete a create whose delete is in the batch (its old row is
    nowhere), and two partitions each waiting for the other would never move: their
    creates go to the error table."""
    incomplete = pa.table({"p": pa.array([0, 1], pa.int32()), "o": pa.array([2, 0], pa.int64()),
                           "op": ["c", "c"], "lsn": pa.array([6, 5], pa.int64())})
    both = frozenset({0, 1})
    assert creates_held(incomplete, "p", "o", "op", both, lambda at: set(), "lsn") == {}  # each waits for the other
    assert creates_held(incomplete, "p", "o", "op", both | {2}, lambda at: set(), "lsn") == {0: 2, 1: 0}
    assert creates_held(incomplete, "p", "o", "op", both | {2}, lambda at: {5}, "lsn") == {0: 2}
    assert creates_held(incomplete, "p", "o", "op", both | {2}, lambda at: {5, 6}, "lsn") == {}

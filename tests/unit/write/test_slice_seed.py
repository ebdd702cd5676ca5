"""The log blocks' cumulative key range a write chains on, rebuilt after a log compaction.

Stitched blocks carry no cumulative summary (a writer may commit while they are
written), so the next write rebuilds it from the slice's log blocks: only those a reader
applies (not the blocks the log compaction replaced), from their own footers' ranges.
The base file's keys are not in it: the base file's own footer answers for them (issue 13:
a summary that held them was rewritten, whole, into every block). Since issue 13 the
summary is a key range only (no cumulative filter; see ``streamer.index.rfc06``).
"""

from __future__ import annotations

import pyarrow as pa

from streamer.config.policies import LogCompactionPolicy
from streamer.read import Table
from streamer.services.executor import execute
from streamer.services.log_compaction import schedule_log_compaction
from streamer.write import HudiWriter, TableConfig, WriteOptions
from streamer.write.filegroup import FileGroupTask, _slice_seed
from streamer.write.state import TableState

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
OPTS = WriteOptions(engine="local", slice_bloom_num_entries=100, slice_bloom_max_entries=100_000)


def _rows(ids, ts):
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64()),
                     "v": [f"v{ts}"] * len(ids)}, schema=SCHEMA)


def test_seed_after_log_compaction_counts_live_distinct_keys_once(tmp_path):
    p = str(tmp_path / "t")
    w = HudiWriter.create(p, TableConfig("t", ("id",), (), "ts"), schema=SCHEMA, options=OPTS)
    w.upsert(_rows(range(300), 0))  # one file group, 300 keys in its base file
    for i in range(1, 7):  # six blocks of 150 updates each
        w.upsert(_rows(range(i * 20, i * 20 + 150), i))
    lc = schedule_log_compaction(Table.open(p), LogCompactionPolicy(min_blocks=3))
    assert lc is not None and execute(Table.open(p), lc).status == "completed"

    state = TableState.load(w.fs, p)
    [s] = state.slices
    task = FileGroupTask(0, s.partition_path, s.file_id, False, s.base_instant, slice=s)
    seed = _slice_seed(w._context(state, state.timeline.new_instant_time(), SCHEMA), task)
    assert seed.bloom is None
    # the logs hold keys 20..269 (not the base file's 0..299)
    keys = pa.array([str(k) for k in range(20, 270)])
    assert (seed.min_key, seed.max_key) == (min(keys.to_pylist()), max(keys.to_pylist()))

    # and the next write chains on that range; keys only the base file holds
    # (0..9) are still found: updated in place, not inserted a second time
    res = w.upsert(_rows(range(10), 9))
    assert sorted(Table.open(p).read().column("id").to_pylist()) == list(range(300))
    assert res.lookup is not None and res.lookup.keys_read >= 1

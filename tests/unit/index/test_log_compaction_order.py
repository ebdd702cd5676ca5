"""The index walks a slice's blocks in the order a reader applies them.

Found by the services concurrency test (a writer beside an async log compactor): a key
deleted, then re-inserted while a log compaction of the range holding the delete was
running. The compaction's block (a delete of the key) was appended *after* the re-insert,
but stands where the blocks it replaced were. The index read the blocks in file order,
saw the key deleted, and routed its next update to another file group: two live copies
of one key, the stale one never deleted again.
"""

from __future__ import annotations

import pyarrow as pa

from streamer.config.policies import LogCompactionPolicy
from streamer.index.bloom_index import BloomIndex
from streamer.index.slice_members import is_committed_fn
from streamer.read import Table
from streamer.services.executor import execute
from streamer.services.log_compaction import schedule_log_compaction
from tests.support import block_tables as tg


def _row(key: int, ts: int, city: str = "nyc") -> pa.Table:
    return pa.Table.from_pylist([{"id": key, "city": city, "ts": ts, "value": f"v{ts}"}], schema=tg.SCHEMA)


def test_update_after_reinsert_during_log_compaction_stays_in_its_group(tmp_path):
    p = str(tmp_path / "t")
    w = tg.create(p)
    model = tg.Model()
    w.upsert(pa.concat_tables([_row(1, 1), _row(2, 1)]))
    model.apply(pa.concat_tables([_row(1, 1), _row(2, 1)]))
    for ts in (2, 3):  # log blocks: an update, then the delete of key 1
        w.upsert(_row(2, ts))
        model.apply(_row(2, ts))
    w.delete(_row(1, 4))
    model.apply(deletes=_row(1, 4))
    inst = schedule_log_compaction(Table.open(p), LogCompactionPolicy(min_blocks=2))
    assert inst is not None, "the test needs a log compaction over the delete"

    w.upsert(_row(1, 5))  # re-insert while the log compaction runs
    model.apply(_row(1, 5))
    pol = LogCompactionPolicy(min_blocks=2)
    assert execute(Table.open(p), inst, log_policy=pol).status == "completed"

    t = Table.open(p)
    completed = frozenset(i.timestamp for i in t.timeline.completed())
    index = BloomIndex(t.fs, t.fsview.latest_merged_slices(), is_committed_fn(completed, None))
    found = index.lookup(pa.array(["1"]), pa.array(["nyc"])).file_ids.to_pylist()
    assert found == [t.fsview.file_groups("nyc")[0].file_id], "the re-inserted key must be found"

    w.upsert(_row(1, 6))  # must update the re-inserted row where it lives
    model.apply(_row(1, 6))
    rows = tg.read_ours(p)
    assert [r for r in rows if r["id"] == 1] == [{"id": 1, "city": "nyc", "ts": 6, "value": "v6"}]
    assert rows == model.snapshot()
    assert tg.read_hudi_rs(p) == model.snapshot()

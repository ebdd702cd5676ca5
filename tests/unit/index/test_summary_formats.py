"""Log blocks carry a summary of the slice's log blocks only; older blocks stay indexable.

Blocks written before issue 13 carry ``mor_streamer.slice.*``: a cumulative summary of
the whole slice (base file keys included), rewritten into every block. New blocks carry
``mor_streamer.logs.*`` (their slice's log keys) and the lookup adds the base file's own
footer. A table whose newest blocks are of the old format is looked up by their summary,
and the next write switches it to the new one - updates land in place either way.
"""

from __future__ import annotations

import pyarrow as pa

from streamer.index import rfc06
from streamer.read import Table
from streamer.table.log_format import BlockType, read_log_file
from streamer.write import HudiWriter, TableConfig, WriteOptions, filegroup

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
OPTS = WriteOptions(engine="local", slice_bloom_num_entries=100)


def _rows(ids, ts):
    return pa.table({"id": pa.array(list(ids), pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64()),
                     "v": [f"v{ts}"] * len(ids)}, schema=SCHEMA)


def _old_format(sorted_keys, prev, params, base_instant, *, base_keys):
    """What the previous version wrote: the whole slice (base keys too) under slice.*"""
    kv = rfc06.block_metadata(sorted_keys, prev, params, base_instant)
    whole = rfc06.KeySummary.of_keys(pa.concat_arrays([base_keys, sorted_keys]), params.new_slice())
    kv = {k: v for k, v in kv.items() if not k.startswith(rfc06.LOGS_PREFIX)}
    kv.update(whole.to_kv(slice_level=True))
    return kv


def _footer_keys(path: str) -> list[set[str]]:
    t = Table.open(path)
    out = []
    for s in t.fsview.latest_merged_slices():
        for lf in s.log_files:
            for b in read_log_file(t.fs, lf.path, lazy=False):
                if b.block_type == BlockType.PARQUET_DATA:
                    out.append({k.decode() for k in b.parquet_metadata()})
    return out


def test_old_whole_slice_summaries_still_index_and_new_blocks_switch(tmp_path, monkeypatch):
    p = str(tmp_path / "t")
    w = HudiWriter.create(p, TableConfig("t", ("id",), (), "ts"), schema=SCHEMA, options=OPTS)
    w.upsert(_rows(range(200), 0))
    base_keys = pa.array([str(i) for i in range(200)])
    with monkeypatch.context() as m:
        m.setattr(filegroup, "block_metadata",
                  lambda k, prev, params, bi: _old_format(k, None, params, bi, base_keys=base_keys))
        w.upsert(_rows(range(150, 250), 1))  # 50 updates, 50 inserts: an old-format block
    assert all(rfc06.SLICE_BLOOM_KEY in k and rfc06.LOGS_BLOOM_KEY not in k for k in _footer_keys(p))

    w.upsert(_rows(range(0, 20), 2))  # keys only the base file holds: looked up via the old summary
    w.upsert(_rows(range(230, 240), 3))  # keys only the old block holds
    t = Table.open(p)
    ids = t.read().column("id").to_pylist()
    assert sorted(ids) == list(range(250)), "an update became a second copy"
    newest = _footer_keys(p)[-1]
    assert rfc06.LOGS_BLOOM_KEY in newest and rfc06.SLICE_BLOOM_KEY not in newest


def test_new_blocks_summarise_log_keys_only(tmp_path):
    p = str(tmp_path / "t")
    w = HudiWriter.create(p, TableConfig("t", ("id",), (), "ts"), schema=SCHEMA, options=OPTS)
    w.upsert(_rows(range(5000), 0))
    w.upsert(_rows(range(10), 1))
    w.upsert(_rows(range(10, 20), 2))
    t = Table.open(p)
    [s] = t.fsview.latest_merged_slices()
    blocks = [b for lf in s.log_files for b in read_log_file(t.fs, lf.path, lazy=False)]
    summary = rfc06.KeySummary.from_kv(blocks[-1].parquet_metadata(), slice_level=False, logs_level=True)
    assert len(summary.bloom.rows) == 1  # 20 log keys, not the base file's 5000
    assert summary.bloom.might_contain_many(pa.array([str(i) for i in range(20)])).all()
    # bytes: each block's footer is sized to the logs, not to the 5000-key slice
    assert max(b.size for b in blocks) < 8_000
    w.upsert(_rows(range(4990, 5000), 3))  # base-only keys: found through the base footer
    assert sorted(Table.open(p).read().column("id").to_pylist()) == list(range(5000))

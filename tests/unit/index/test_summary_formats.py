"""Log blocks carry their own filter and the key range of the slice's log blocks; blocks
of both older formats stay indexable.

Blocks written before issue 13 carry ``mor_streamer.slice.*``: a cumulative filter of
the whole slice (base file keys included), rewritten into every block; the next format
carried ``mor_streamer.logs.bloomfilter``, a cumulative filter of the slice's log keys.
New blocks carry only ``mor_streamer.logs.min/max_record_key`` beside their own filter,
and the lookup probes each member's filter. A table whose newest blocks are of an older
format is looked up by their summary, and the next write switches it to the new one -
updates land in place either way.
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


def _old_format(sorted_keys, prev, params, base_instant, *, base_keys, with_bloom=True, short=None):
    """What the first version wrote: the whole slice (base keys too) under slice.*"""
    kv = rfc06.block_metadata(sorted_keys, prev, params, base_instant, with_bloom=with_bloom, short=short)
    whole = rfc06.KeySummary.of_keys(pa.concat_arrays([base_keys, sorted_keys]), params.new_slice())
    kv = {k: v for k, v in kv.items() if not k.startswith(rfc06.LOGS_PREFIX)}
    kv.update(whole.to_kv(slice_level=True))
    return kv


def _logs_filter_format(sorted_keys, prev, params, base_instant, *, log_keys, with_bloom=True, short=None):
    """What the second version wrote: a cumulative filter of the slice's log keys."""
    kv = rfc06.block_metadata(sorted_keys, prev, params, base_instant, with_bloom=with_bloom, short=short)
    logs = rfc06.KeySummary.of_keys(pa.concat_arrays([log_keys, sorted_keys]), params.new_slice())
    kv.update(logs.to_kv(slice_level=False, logs_level=True))
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
                  lambda k, prev, params, bi, **kw: _old_format(k, None, params, bi, base_keys=base_keys, **kw))
        w.upsert(_rows(range(150, 250), 1))  # 50 updates, 50 inserts: an old-format block
    assert all(rfc06.SLICE_BLOOM_KEY in k and rfc06.LOGS_BLOOM_KEY not in k for k in _footer_keys(p))

    w.upsert(_rows(range(0, 20), 2))  # keys only the base file holds: looked up via the old summary
    w.upsert(_rows(range(230, 240), 3))  # keys only the old block holds
    t = Table.open(p)
    ids = t.read().column("id").to_pylist()
    assert sorted(ids) == list(range(250)), "an update became a second copy"
    newest = _footer_keys(p)[-1]
    assert rfc06.LOGS_MIN_KEY in newest and rfc06.SLICE_BLOOM_KEY not in newest
    assert rfc06.LOGS_BLOOM_KEY not in newest


def test_logs_filter_blocks_still_index_and_new_blocks_switch(tmp_path, monkeypatch):
    p = str(tmp_path / "t")
    w = HudiWriter.create(p, TableConfig("t", ("id",), (), "ts"), schema=SCHEMA, options=OPTS)
    w.upsert(_rows(range(200), 0))
    with monkeypatch.context() as m:
        m.setattr(filegroup, "block_metadata",
                  lambda k, prev, params, bi, **kw: _logs_filter_format(
                      k, None, params, bi, log_keys=pa.array([], pa.string()), **kw))
        w.upsert(_rows(range(150, 250), 1))
    assert all(rfc06.LOGS_BLOOM_KEY in k for k in _footer_keys(p))
    w.upsert(_rows(range(0, 20), 2))  # base-only keys, looked up through the old-format block
    w.upsert(_rows(range(230, 240), 3))  # keys only the old block holds
    assert sorted(Table.open(p).read().column("id").to_pylist()) == list(range(250))
    newest = _footer_keys(p)[-1]
    assert rfc06.LOGS_BLOOM_KEY not in newest and rfc06.LOGS_MIN_KEY in newest


def test_block_footers_do_not_grow_with_the_slices_earlier_blocks(tmp_path):
    p = str(tmp_path / "t")
    w = HudiWriter.create(p, TableConfig("t", ("id",), (), "ts"), schema=SCHEMA, options=OPTS)
    w.upsert(_rows(range(5000), 0))
    for i in range(1, 9):  # eight blocks of 100 new keys each
        w.upsert(_rows(range(5000 + i * 100, 5100 + i * 100), i))
    t = Table.open(p)
    [s] = t.fsview.latest_merged_slices()
    blocks = [b for lf in s.log_files for b in read_log_file(t.fs, lf.path, lazy=False)]
    kvs = [b.parquet_metadata() for b in blocks]
    sizes = [sum(len(k) + len(v) for k, v in kv.items()) for kv in kvs]
    assert len(set(sizes)) == 1, sizes  # the 8th block's footer is the 1st's size
    newest = rfc06.KeySummary.from_kv(kvs[-1], slice_level=False, logs_level=True)
    assert newest.bloom is None
    log_keys = [str(k) for k in range(5100, 5900)]
    assert (newest.min_key, newest.max_key) == (min(log_keys), max(log_keys))
    # a lookup still finds keys of every block and of the base file only
    w.upsert(_rows([4990, 5150, 5850], 9))
    assert sorted(Table.open(p).read().column("id").to_pylist()) == [*range(5000), *range(5100, 5900)]


def test_a_block_filter_has_the_rates_bits_and_fewer_hashes():
    """A block's own filter: 29 bits per key (the bits of block_fpp), block_hashes hash
    functions; it never misses a key and its false positives stay near the design rate."""
    import numpy as np

    from streamer.table.bloom import BloomFilter

    params = rfc06.BloomParams()
    keys = pa.array([f"key-{i:07d}" for i in range(60_000)])
    f = params.block_sized_for(len(keys))
    full = BloomFilter.new_dynamic(60_000, params.block_fpp, 100_000)
    assert f.vector_size == full.vector_size and f.nb_hash == params.block_hashes < full.nb_hash
    f.add_many(keys)
    parsed = BloomFilter.from_footer(f.serialize(), f.type_code)
    assert parsed.nb_hash == params.block_hashes
    assert parsed.might_contain_many(keys).all()
    absent = pa.array([f"other-{i:08d}" for i in np.arange(400_000)])
    false_positives = int(parsed.might_contain_many(absent).sum())
    assert false_positives <= 20  # ~4.8e-6 expected: ~2 of 400,000

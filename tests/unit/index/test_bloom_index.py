"""Acceptance 2: the bloom index over base files and indexed log blocks.

After several commits (base files + Parquet log blocks carrying their own filters and
the key range of their slice's log blocks), a lookup of existing and new keys must return exactly the right
file group for every existing key and "insert" for every new one, and the counters
must show that members whose range/bloom excluded all looked-up keys were read no
further than their footer.
"""

from __future__ import annotations

import pyarrow as pa

from streamer.index.bloom_index import BloomIndex
from streamer.index.footer_cache import CACHE
from streamer.index.rfc06 import KeySummary, extend
from streamer.read.table import Table
from tests.support.bloom_tables import build_indexed_table, file_group_truth


def test_lookup_tags_exact_file_groups(tmp_path):
    path = build_indexed_table(tmp_path)
    truth = file_group_truth(path)
    t = Table.open(path)
    slices = t.fsview.latest_merged_slices()
    assert any(s.log_files for s in slices), "the table must have log blocks to index"
    existing = [k for k in truth if k[0] == "sf"][::7] + [k for k in truth if k[0] == "nyc"][::50]
    new = [("sf", "999999"), ("sf", "2500"), ("nyc", "1000"), ("oslo", "1")]
    keys = pa.array([k for _, k in existing + new])
    parts = pa.array([p for p, _ in existing + new])
    completed = frozenset(i.timestamp for i in t.timeline.completed())
    res = BloomIndex(t.fs, slices, lambda i: i in completed).lookup(keys, parts)
    got = res.file_ids.to_pylist()
    assert got[: len(existing)] == [truth[k] for k in existing]
    assert got[len(existing):] == [None] * len(new)


def test_lookup_reads_only_footers_of_excluded_members(tmp_path):
    path = build_indexed_table(tmp_path)
    t = Table.open(path)
    slices = t.fsview.latest_merged_slices()
    completed = frozenset(i.timestamp for i in t.timeline.completed())
    # keys that live only in the block written by the ts=3 commit (ids 3000..3059)
    keys = pa.array([str(i) for i in range(3000, 3060, 5)] + ["3999999"])
    parts = pa.array(["sf"] * len(keys))
    CACHE.clear()  # the writer's own lookups cached base footers: count from cold
    res = BloomIndex(t.fs, slices, lambda i: i in completed, parallelism=1).lookup(keys, parts)
    hit_groups = {f for f in res.file_ids.to_pylist() if f}
    assert len(hit_groups) == 1 and res.file_ids.to_pylist()[-1] is None
    st = res.stats
    # every member opened for keys was one whose own footer admitted a key...
    assert st.keys_read >= 1
    assert all(m in st.footer_ids for m in st.key_ids)
    # ...and nothing else was opened: only the ts=3 block holds these keys
    assert st.keys_read == 1, st.key_ids
    # slices whose summaries excluded the keys cost the newest block's footer and the base
    # file's; a slice whose log blocks' key range admits them (no cumulative filter since
    # issue 13) and the slice holding the keys: every member's footer, never more
    sf_slices = [s for s in slices if s.partition_path == "sf"]
    assert len(sf_slices) >= 2
    all_members = sum((1 if s.base_file else 0) + len(s.log_files) for s in sf_slices)
    assert st.footers_read <= all_members, st.footer_ids
    assert len(set(st.footer_ids)) == st.footers_read  # each footer read once
    # the next lookup (the next micro-batch) reads no footer again: members are immutable
    again = BloomIndex(t.fs, slices, lambda i: i in completed, parallelism=1).lookup(keys, parts)
    assert again.file_ids.to_pylist() == res.file_ids.to_pylist()
    assert again.stats.footers_read == 0, again.stats.footer_ids
    nyc = BloomIndex(t.fs, slices, lambda i: i in completed).lookup(
        pa.array(["1", "2"]), pa.array(["nyc", "nyc"])
    )
    assert nyc.stats.keys_read == 0 and nyc.stats.footers_read == len(
        [s for s in slices if s.partition_path == "nyc"]
    )


def test_cumulative_summary_covers_every_block():
    s = None
    batches = [pa.array([f"k{i:05d}" for i in range(b * 50, b * 50 + 50)]) for b in range(5)]
    for b in batches:
        s = extend(s, b)
    everything = pa.concat_arrays(batches)
    assert s.candidates(everything).all()
    assert s.min_key == "k00000" and s.max_key == "k00249"
    outside = pa.array(["a", "z", "k99999"])
    assert not s.candidates(outside).any()
    kv = {k.encode(): v.encode() for k, v in s.to_kv(slice_level=True).items()}
    again = KeySummary.from_kv(kv, slice_level=True)
    assert again.candidates(everything).all()

"""The index's fast paths give exactly the answers of the slow ones.

* bloom skip: a member whose key range admits many of the looked-up keys (relative to
  its rows) is confirmed from its key column without probing its bloom filter;
* the bloom filter's lazy, early-exit membership test and shared hash chains agree with
  a plain "all k bits set in some row" check, for every row layout (one row, many rows,
  more than 64 rows).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamer.index import bloom_index
from streamer.index.bloom_index import BloomIndex
from streamer.index.footer_cache import CACHE
from streamer.index.rfc06 import BloomParams, KeySummary, block_metadata
from streamer.read.table import Table
from streamer.table.bloom import BloomFilter, hash_chain, hash_positions
from tests.support.bloom_tables import build_indexed_table, file_group_truth


@pytest.fixture(autouse=True)
def _filters_asked(monkeypatch):
    """These lookups ask about many of a slice's keys, which the dense path would match
    without any filter (tests/unit/index/test_dense_lookup.py): here the filter paths are
    the subject, so it is off."""
    monkeypatch.setattr(bloom_index, "DENSE_ROWS_PER_KEY", 0)


def _lookup(path, keys, parts, monkeypatch, fraction, min_keys=0):
    monkeypatch.setattr(bloom_index, "BLOOM_SKIP_FRACTION", fraction)
    monkeypatch.setattr(bloom_index, "BLOOM_SKIP_MIN_KEYS", min_keys)
    CACHE.clear()  # every lookup from cold: the stats count footers read from storage
    t = Table.open(path)
    completed = frozenset(i.timestamp for i in t.timeline.completed())
    return BloomIndex(t.fs, t.fsview.latest_merged_slices(), lambda i: i in completed, parallelism=1).lookup(
        keys, parts
    )


def _count_probes(monkeypatch, what=lambda bloom, keys: len(keys)) -> list[int]:
    """A list that receives ``what(filter, keys)`` of every bloom filter probe (by
    default the number of keys probed)."""
    probes: list[int] = []
    real = BloomFilter.might_contain_many

    def spy(self, ks):
        probes.append(what(self, ks))
        return real(self, ks)

    monkeypatch.setattr(BloomFilter, "might_contain_many", spy)
    return probes


def test_bloom_skip_gives_the_same_tags(tmp_path, monkeypatch):
    defaults = (bloom_index.BLOOM_SKIP_FRACTION, bloom_index.BLOOM_SKIP_MIN_KEYS)
    path = build_indexed_table(tmp_path)
    truth = file_group_truth(path)
    existing = sorted(truth)
    new = [("sf", str(i)) for i in range(900, 1000)] + [("sf", str(i)) for i in range(2060, 2100)]
    new += [("nyc", "1"), ("oslo", "5")]
    keys = pa.array([k for _, k in existing + new])
    parts = pa.array([p for p, _ in existing + new])
    expected = [truth[k] for k in existing] + [None] * len(new)

    probes = _count_probes(monkeypatch)
    never = _lookup(path, keys, parts, monkeypatch, 1e9)
    probed_never = len(probes)
    probes.clear()
    always = _lookup(path, keys, parts, monkeypatch, 0.0)
    probed_always = len(probes)
    default = _lookup(path, keys, parts, monkeypatch, *defaults)
    assert never.file_ids.to_pylist() == expected
    assert always.file_ids.to_pylist() == expected
    assert default.file_ids.to_pylist() == expected
    # the skip branch never probes more (it applies to members of a slice whose lookup
    # holds a filter over all its keys; a base file's filter, asked by the lookup, is
    # never asked again either way - see the next test)
    assert probed_always <= probed_never
    # ...and every member it confirmed had its footer read first
    assert all(m in always.stats.footer_ids for m in always.stats.key_ids)


def test_each_filter_is_probed_once_per_lookup(tmp_path, monkeypatch):
    """A base file's filter answers the slice's lookup for every key; its answer then
    stands for the base file (probing it again with the candidates repeated every true
    hit's k hashes), so no filter is probed twice and the tags stay the same."""
    path = build_indexed_table(tmp_path)
    truth = file_group_truth(path)
    existing = sorted(truth)
    new = [("sf", str(i)) for i in range(900, 1000)] + [("nyc", str(i)) for i in range(6000, 6050)]
    keys = pa.array([k for _, k in existing + new])
    parts = pa.array([p for p, _ in existing + new])
    probed = _count_probes(monkeypatch, lambda bloom, keys: id(bloom))
    got = _lookup(path, keys, parts, monkeypatch, 1e9)  # never skip a member's filter
    assert got.file_ids.to_pylist() == [truth[k] for k in existing] + [None] * len(new)
    assert probed and max(Counter(probed).values()) == 1


def test_candidates_bloom_limit_keeps_range_pruning():
    bf = BloomFilter.new_dynamic(100, 0.01, 1000)
    s = KeySummary.of_keys(pa.array(["k10", "k20", "k30"]), bf)
    keys = pa.array(["a", "k10", "k15", "k30", "z"])
    assert s.candidates(keys, bloom_limit=1).tolist() == [False, True, True, True, False]
    probed = s.candidates(keys)
    assert probed[[0, 4]].tolist() == [False, False] and probed[[1, 3]].all()
    assert s.candidates(keys, bloom_limit=100).tolist() == probed.tolist()


def _keys(n, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 10**9, n)
    return pa.array([str(i) if i % 3 else f"id:{i:x}-ü{i % 7}-{'x' * (i % 11)}" for i in ids])


def _reference(bf: BloomFilter, keys) -> np.ndarray:
    pos = hash_positions(keys, bf.nb_hash, bf.vector_size)
    hit = np.zeros(len(pos), dtype=bool)
    for row in bf.rows:
        hit |= row.bits[pos].all(axis=1)
    return hit


@pytest.mark.parametrize(
    "entries,fpp,max_entries,n",
    [(60_000, 1e-9, 100_000, 3_000), (50, 0.01, 1_000, 900), (10, 0.1, 700, 800), (10, 0.2, 25, 60)],
)
def test_membership_matches_all_bits_reference(entries, fpp, max_entries, n):
    bf = BloomFilter.new_dynamic(entries, fpp, max_entries)
    added = _keys(n, 1)
    bf.add_many(added[: n // 3])
    bf.add_many(added[n // 3 :])
    probe = pa.concat_arrays([added, _keys(4 * n, 2)])
    got = bf.might_contain_many(probe)
    assert got[:n].all()
    assert got.tolist() == _reference(bf, probe).tolist()
    back = BloomFilter.from_footer(bf.serialize(), bf.type_code)
    assert back.might_contain_many(probe).tolist() == got.tolist()


def test_shared_hash_chain_builds_the_same_filters():
    keys = _keys(2_000, 3)
    k = 30
    chain = hash_chain(keys, k)
    a, b = BloomFilter.new_dynamic(1000, 1e-9, 5000), BloomFilter.new_dynamic(1000, 1e-9, 5000)
    a.add_many(keys)
    b.add_hashes(chain)
    assert a.serialize() == b.serialize()
    small = BloomFilter.new_dynamic(300, 1e-3, 1000)  # fewer hashes: a prefix of the chain
    ref = BloomFilter.new_dynamic(300, 1e-3, 1000)
    small.add_hashes(chain)
    ref.add_many(keys)
    assert small.nb_hash < k and small.serialize() == ref.serialize()


def test_block_metadata_is_the_blocks_own_filter_and_the_logs_range():
    params = BloomParams()
    first = pa.array(sorted(f"k{i:05d}" for i in range(0, 3000, 3)))
    second = pa.array(sorted(f"k{i:05d}" for i in range(1, 3000, 3)))
    kv1 = block_metadata(first, None, params, "001")
    prev = KeySummary.from_kv({k.encode(): v.encode() for k, v in kv1.items()}, slice_level=False,
                              logs_level=True)
    kv2 = block_metadata(second, prev, params, "001")
    own = KeySummary.of_keys(second, params.block_sized_for(len(second)))
    assert kv2["org.apache.hudi.bloomfilter"] == own.bloom.serialize()
    assert (kv2["mor_streamer.logs.min_record_key"], kv2["mor_streamer.logs.max_record_key"]) == (
        "k00000", "k02998")
    # no cumulative filter: the footer does not grow with the slice's earlier blocks
    assert "mor_streamer.logs.bloomfilter" not in kv2 and "mor_streamer.slice.bloomfilter" not in kv2
    assert sum(map(len, kv2.values())) == sum(map(len, kv1.values()))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=40), st.lists(st.integers(0, 50), max_size=200))
def test_present_matches_is_in_whichever_side_is_hashed(cands, members):
    keys = pa.array([f"k{i}" for i in cands], pa.string())
    member_keys = pa.array([f"k{i}" for i in members], pa.string())
    assert bloom_index._present(keys, member_keys).to_pylist() == pc.is_in(keys, value_set=member_keys).to_pylist()


def _all_member_keys_cached(path: str) -> None:
    from streamer.index.slice_members import slice_members

    t = Table.open(path)
    completed = frozenset(i.timestamp for i in t.timeline.completed())
    for s in t.fsview.latest_merged_slices():
        for m in slice_members(t.fs, s, lambda i: i in completed, with_deletes=True):
            m.keys(None)


def test_keys_in_memory_are_matched_directly_with_the_same_tags(tmp_path, monkeypatch):
    """A warm process matches cached key columns without probing filters, and a delete
    still hides the keys written before it - not those written again after it."""
    from streamer.write import HudiWriter
    from tests.support.bloom_tables import rows

    path = build_indexed_table(tmp_path)
    w = HudiWriter.open(path)
    w.delete(pa.table({"id": [2001, 2002, 1005, 3010], "city": ["sf"] * 4, "ts": [9] * 4}))
    w.upsert(rows([2002, 3010], "sf", 10))  # deleted, then written again: live again
    truth = file_group_truth(path)
    existing = sorted(truth)
    gone = [("sf", "2001"), ("sf", "1005")]
    assert not set(gone) & set(truth)
    asked = existing + gone + [("sf", "999"), ("nyc", "7")]
    keys, parts = pa.array([k for _, k in asked]), pa.array([p for p, _ in asked])
    expected = [truth.get(a) for a in asked]

    probes = _count_probes(monkeypatch)
    monkeypatch.setattr(bloom_index, "DIRECT_MATCH_ROWS_PER_KEY", 0)
    cold = _lookup(path, keys, parts, monkeypatch, 0.0)
    cold_probes = len(probes)
    monkeypatch.setattr(bloom_index, "DIRECT_MATCH_ROWS_PER_KEY", 16)
    CACHE.clear()
    _all_member_keys_cached(path)
    probes.clear()
    t = Table.open(path)
    completed = frozenset(i.timestamp for i in t.timeline.completed())
    warm = BloomIndex(t.fs, t.fsview.latest_merged_slices(), lambda i: i in completed, parallelism=1).lookup(keys, parts)
    assert cold.file_ids.to_pylist() == expected
    assert warm.file_ids.to_pylist() == expected
    # the cold lookup probed members' filters, the warm one only the slices' summaries
    assert len(probes) < cold_probes

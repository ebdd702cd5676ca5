"""A lookup of many keys against a partition's slices matches their key columns once,
with the same tags as the filter paths: deletes hide the keys written before them, a key
written again after its delete is live, and keys of other partitions are never found."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from streamer.index import bloom_index
from streamer.index.bloom_index import BloomIndex
from streamer.index.footer_cache import CACHE
from streamer.index.slice_members import Member
from streamer.read.table import Table
from streamer.table.bloom import BloomFilter
from streamer.write import HudiWriter
from tests.support.bloom_tables import build_indexed_table, rows
from tests.support.write_model import read_hudi_rs


def file_group_truth(path: str) -> dict[tuple[str, str], str]:
    """``{(partition path, record key): file id}`` as hudi-rs reads the table (not our reader)."""
    t = read_hudi_rs(path).select(["_hoodie_partition_path", "_hoodie_record_key", "_hoodie_file_name"])
    return {(r["_hoodie_partition_path"], r["_hoodie_record_key"]): r["_hoodie_file_name"].split("_")[0]
            for r in t.to_pylist()}


@pytest.fixture
def table_with_deletes(tmp_path) -> str:
    path = build_indexed_table(tmp_path)
    w = HudiWriter.open(path)
    w.delete(pa.table({"id": [2001, 2002, 1005, 3010], "city": ["sf"] * 4, "ts": [9] * 4}))
    w.upsert(rows([2002, 3010], "sf", 10))  # deleted, then written again: live again
    return path


def _index(path: str) -> BloomIndex:
    CACHE.clear()
    t = Table.open(path)
    completed = frozenset(i.timestamp for i in t.timeline.completed())
    return BloomIndex(t.fs, t.fsview.latest_merged_slices(), lambda i: i in completed, parallelism=1)


def _asked(truth: dict) -> list[tuple[str, str]]:
    gone = [("sf", "2001"), ("sf", "1005")]
    assert not set(gone) & set(truth)
    # every stored key, the deleted ones, new keys, and sf's keys asked in nyc
    return sorted(truth) + gone + [("sf", "999"), ("nyc", "7"), ("nyc", "1010"), ("nyc", "2002")]


def _probes(monkeypatch) -> list[int]:
    probes: list[int] = []
    real = BloomFilter.might_contain_many

    def spy(self, ks):
        probes.append(len(ks))
        return real(self, ks)

    monkeypatch.setattr(BloomFilter, "might_contain_many", spy)
    return probes


def test_dense_lookup_tags_like_the_filter_paths_and_probes_no_filter(table_with_deletes, monkeypatch):
    truth = file_group_truth(table_with_deletes)
    asked = _asked(truth)
    keys, parts = pa.array([k for _, k in asked]), pa.array([p for p, _ in asked])
    expected = [truth.get(a) for a in asked]
    probes = _probes(monkeypatch)

    monkeypatch.setattr(bloom_index, "DENSE_ROWS_PER_KEY", 0)
    sparse = _index(table_with_deletes).lookup(keys, parts)
    assert probes, "the filter path probes filters"
    probes.clear()
    monkeypatch.setattr(bloom_index, "DENSE_ROWS_PER_KEY", 10**6)
    dense = _index(table_with_deletes).lookup(keys, parts)

    assert sparse.file_ids.to_pylist() == expected
    assert dense.file_ids.to_pylist() == expected
    assert probes == []
    # every data and delete member was read for keys, each once
    assert len(dense.stats.key_ids) == len(set(dense.stats.key_ids))


@pytest.mark.parametrize("how", ["short keys", "strings", "a long key asked"])
def test_dense_lookup_tags_alike_by_short_keys_and_by_strings(table_with_deletes, monkeypatch, how):
    """Keys of up to 8 bytes are matched as short-key integers, the members' integers kept
    with their key columns; a batch holding a longer key (or no integers) matches strings."""
    truth = file_group_truth(table_with_deletes)
    asked = _asked(truth) + ([("sf", "a key longer than 8 bytes")] if how == "a long key asked" else [])
    keys, parts = pa.array([k for _, k in asked]), pa.array([p for p, _ in asked])
    if how == "strings":
        monkeypatch.setattr(bloom_index, "short_keys", lambda _keys: None)
    as_integers: list[int] = []
    real = Member.short_keys

    def spy(self, column):
        as_integers.append(len(column))
        return real(self, column)

    monkeypatch.setattr(Member, "short_keys", spy)
    monkeypatch.setattr(bloom_index, "DENSE_ROWS_PER_KEY", 10**6)
    dense = _index(table_with_deletes).lookup(keys, parts)
    assert dense.file_ids.to_pylist() == [truth.get(a) for a in asked]
    assert bool(as_integers) == (how == "short keys")


def test_dense_global_lookup_finds_each_key_in_its_own_partition(table_with_deletes, monkeypatch):
    truth = file_group_truth(table_with_deletes)
    by_key = {k: (p, f) for (p, k), f in truth.items()}
    asked = sorted(by_key) + ["2001", "999999"]
    monkeypatch.setattr(bloom_index, "DENSE_ROWS_PER_KEY", 10**6)
    got = _index(table_with_deletes).lookup_global(pa.array(asked))
    assert got.file_ids.to_pylist() == [by_key.get(k, (None, None))[1] for k in asked]
    assert got.partitions.to_pylist() == [by_key.get(k, (None, None))[0] for k in asked]


def test_dense_is_decided_by_the_keys_against_the_rows(table_with_deletes, monkeypatch):
    """Few keys against the slices' rows keep the filter path (the default threshold)."""
    probes = _probes(monkeypatch)
    _index(table_with_deletes).lookup(pa.array(["1010", "999"]), pa.array(["sf", "sf"]))
    assert probes, "two keys against ~600 rows ask the filters"
    probes.clear()
    truth = file_group_truth(table_with_deletes)
    sf = sorted(k for p, k in truth if p == "sf")
    _index(table_with_deletes).lookup(pa.array(sf), pa.array(["sf"] * len(sf)))
    assert probes == [], "every key of the partition is matched directly"


def test_dense_lookup_writes_the_same_table(tmp_path, monkeypatch):
    """An upsert planned by either path writes the rows of the model (read by hudi-rs), and
    each key stays in the file group that held it."""
    tables = {}
    upsert = pa.concat_tables([rows(list(range(1000, 1400, 3)), "sf", 20), rows(list(range(2000, 2200, 7)), "sf", 20),
                               rows([5001, 6000], "nyc", 20)])
    for name, dense in (("sparse", 0), ("dense", 10**6)):
        monkeypatch.setattr(bloom_index, "DENSE_ROWS_PER_KEY", dense)
        path = build_indexed_table(tmp_path / name)
        model = {(r["city"], str(r["id"])): r["v"] for r in read_hudi_rs(path).to_pylist()}
        before = file_group_truth(path)
        for r in upsert.to_pylist():
            model[(r["city"], str(r["id"]))] = r["v"]
        HudiWriter.open(path).upsert(upsert)
        got = read_hudi_rs(path).to_pylist()
        assert {(r["_hoodie_partition_path"], r["_hoodie_record_key"]): r["v"] for r in got} == model
        assert len(got) == len(model)
        after = file_group_truth(path)
        assert all(after[k] == fid for k, fid in before.items())
        tables[name] = sorted(model.items())
    assert tables["dense"] == tables["sparse"]


@pytest.mark.parametrize(("n_batch", "n_stored"), [(1, 5), (40, 3_000), (20_000, 60_000), (5, 3), (1_000, 1_000)])
def test_stored_keys_find_their_batch_positions_through_the_bitmap_pre_test(n_batch, n_stored):
    """The bitmap only turns keys away (a key of the batch always passes it): every stored
    key gets Arrow's ``index_in`` answer - the batch's first position of a repeated key,
    -1 when absent - for keys sharing their low bytes (short keys are zero-padded) and 0."""
    from streamer.index.bloom_index import _short_positions_in

    rng = np.random.default_rng(n_batch)
    batch = (rng.choice(2**40, n_batch, replace=False).astype(np.uint64) << np.uint64(24))
    batch[-1] = 0
    if n_batch > 2:
        batch[1] = batch[0]  # a repeated key: the first position counts
    other = rng.integers(0, 2**40, n_stored).astype(np.uint64) << np.uint64(24)
    stored = rng.permutation(np.concatenate([batch[: max(1, n_batch // 3)], other, batch[-1:]]))
    want = pc.fill_null(pc.index_in(pa.array(stored), value_set=pa.array(batch)), -1).to_numpy()
    got = _short_positions_in(batch, stored)
    assert np.array_equal(got, want)


def test_a_capped_bitmap_only_turns_fewer_keys_away(monkeypatch):
    """A batch larger than the bitmap's cap shares its marks: more stored keys reach the
    hash lookup, none is answered differently."""
    from streamer.index.bloom_index import _short_positions_in

    monkeypatch.setattr(bloom_index, "_MARK_BITS_MAX", 10)  # 1,024 marks for 5,000 keys
    rng = np.random.default_rng(11)
    batch = rng.choice(2**40, 5_000, replace=False).astype(np.uint64) << np.uint64(24)
    stored = rng.permutation(np.concatenate([batch[:2_000], rng.integers(0, 2**40, 20_000).astype(np.uint64)]))
    want = pc.fill_null(pc.index_in(pa.array(stored), value_set=pa.array(batch)), -1).to_numpy()
    assert np.array_equal(_short_positions_in(batch, stored), want)

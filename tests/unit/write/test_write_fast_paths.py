"""The writer's shortcuts change nothing: combining a batch without duplicates, and the
local engine handing each file group its rows already in key order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from streamer.data import short_keys
from streamer.write.engine.local import task_groups, task_order
from streamer.write.filegroup import _sorted_by_key
from streamer.write.keygen import PARTITION_PATH_COL, RECORD_KEY_COL
from streamer.write.plan import TASK_COL
from streamer.write.prepare import _combine, _distinct, _int_keys_unique, latest_per_key


def _batch(keys, parts, ts):
    return pa.table({RECORD_KEY_COL: keys, PARTITION_PATH_COL: parts, "ts": ts,
                     "row": list(range(len(keys)))})


def test_unique_keys_come_back_unchanged_in_arrival_order():
    t = _batch(["b", "a", "c", "d"], ["p", "p", "q", "p"], [1, 2, 3, 4])
    assert latest_per_key(t, "ts").to_pylist() == t.to_pylist()


def test_duplicates_still_combined_by_ordering_then_arrival():
    t = _batch(["b", "a", "b", "a", "c", "c"], ["p"] * 6, [5, 1, 3, 1, 2, 2])
    out = latest_per_key(t, "ts").to_pylist()
    # b: ts 5 (row 0) beats ts 3; a: tie on ts -> the later row 3; c: tie -> row 5
    assert [(r[RECORD_KEY_COL], r["row"]) for r in out] == [("b", 0), ("a", 3), ("c", 5)]


def test_same_key_in_two_partitions_is_two_records():
    t = _batch(["k", "k", "k"], ["p", "q", "p"], [1, 1, 2])
    out = latest_per_key(t, "ts").to_pylist()
    assert sorted((r[PARTITION_PATH_COL], r["row"]) for r in out) == [("p", 2), ("q", 1)]


@pytest.mark.parametrize("keys_as", ["strings", "short keys"])
@pytest.mark.parametrize("unique", [False, True])
def test_each_task_gets_its_rows_sorted_by_key_stably(keys_as, unique):
    """Sorted as strings, or as :func:`short_keys` integers (keys of up to 8 bytes, here
    of 1 to 7 so that a key is another's prefix): the same order, ties in arrival order."""
    rng = np.random.default_rng(0)
    n = 500
    ids = rng.permutation(n) if unique else rng.integers(0, 200, n)  # duplicates on purpose
    keys = pa.array([f"k{i}" if i % 3 else f"k{i:05d}" for i in ids])
    tasks = pa.array(rng.integers(0, 5, n).astype(np.int32))
    rows = pa.table({RECORD_KEY_COL: keys, TASK_COL: tasks, "row": np.arange(n)})
    short = short_keys(keys) if keys_as == "short keys" else None
    assert (short is None) == (keys_as == "strings")
    groups = [(tid, rows.take(pa.array(task_order(rows, idx, short)))) for tid, idx in task_groups(tasks.to_numpy())]
    assert [tid for tid, _ in groups] == sorted({int(t) for t in tasks.to_pylist()})
    for tid, g in groups:
        assert _sorted_by_key(g)
        expected = rows.filter(pc.equal(rows.column(TASK_COL), tid))
        expected = expected.take(pc.sort_indices(expected, [(RECORD_KEY_COL, "ascending")]))  # stable
        assert g.column("row").to_pylist() == expected.column("row").to_pylist()


def test_sorted_by_key_detects_disorder():
    assert _sorted_by_key(pa.table({RECORD_KEY_COL: ["a", "b", "b", "c"]}))
    assert not _sorted_by_key(pa.table({RECORD_KEY_COL: ["a", "c", "b"]}))
    assert _sorted_by_key(pa.table({RECORD_KEY_COL: pa.array([], pa.string())}))


def _slice_blooms(path: str) -> list[tuple[str, str]]:
    """Every Parquet block's cumulative (log blocks) key range in the table, sorted."""
    from streamer.read.table import Table
    from streamer.table.log_format import BlockType, read_log_file

    t = Table.open(path)
    out = []
    for s in t.fsview.latest_merged_slices():
        for lf in s.log_files:
            for b in read_log_file(t.fs, lf.path):
                if b.block_type == BlockType.PARQUET_DATA:
                    kv = b.parquet_metadata()
                    out.append((kv[b"mor_streamer.logs.min_record_key"].decode(),
                                kv[b"mor_streamer.logs.max_record_key"].decode()))
    return sorted(out)


def test_appends_reuse_the_index_slice_summaries_with_identical_footers(tmp_path, monkeypatch):
    from streamer.index import bloom_index
    from streamer.write import HudiWriter, TableConfig, WriteOptions, filegroup

    opts = WriteOptions(engine="local", slice_bloom_num_entries=50)

    def run(path, reuse):
        calls = []
        real = filegroup.slice_members

        def counting(*a, **k):
            calls.append(1)
            return real(*a, **k)

        with monkeypatch.context() as m:
            m.setattr(filegroup, "slice_members", counting)
            if not reuse:
                m.setattr(bloom_index, "slice_key", lambda s: ("never", "matches", ""))
            w = HudiWriter.create(path, TableConfig("t", ("id",), ("city",), "ts"), options=opts)
            for b in range(4):
                ids = list(range(b * 40, b * 40 + 60))  # 20 updates, 40 inserts per batch
                w.upsert(pa.table({"id": ids, "city": ["sf" if i % 3 else "nyc" for i in ids],
                                   "ts": [b] * len(ids)}))
        return len(calls)

    reused = run(str(tmp_path / "a"), True)
    fresh = run(str(tmp_path / "b"), False)
    assert reused < fresh
    assert _slice_blooms(str(tmp_path / "a")) == _slice_blooms(str(tmp_path / "b"))


def test_an_integer_key_field_is_tested_for_repeats_in_place_of_its_strings():
    t = pa.table({"id": [3, 1, 3, 2], RECORD_KEY_COL: ["3", "1", "3", "2"],
                  PARTITION_PATH_COL: ["p"] * 4, "ts": [1, 2, 3, 4]})
    assert not _int_keys_unique(t, ("id",))
    assert _int_keys_unique(t.slice(1), ("id",))
    out = latest_per_key(t, "ts", key_fields=("id",)).to_pylist()
    assert [(r["id"], r["ts"]) for r in out] == [(1, 2), (3, 3), (2, 4)]
    # a null in the field (or no integer key field) leaves the test to the keys themselves
    nulls = t.set_column(0, "id", pa.array([None, 1, 5, 2], pa.int64()))
    assert not _int_keys_unique(nulls, ("id",))
    assert not _int_keys_unique(t.slice(1), ()) and not _int_keys_unique(t.slice(1), ("city",))
    assert latest_per_key(nulls, "ts", key_fields=("id",)).column("ts").to_pylist() == [2, 3, 4]


@pytest.mark.parametrize("seed", range(6))
def test_only_repeated_keys_are_sorted_and_the_result_is_the_full_sorts(seed):
    """Rows of keys that occur once are kept without sorting; the rest are combined by the
    full sort's rule (greatest ordering, last on ties, per partition and key) - the same
    rows, in arrival order, as sorting the whole batch."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    keys = [f"k{i}" for i in rng.integers(0, max(2, n // (1 + seed)), n)]
    parts = [f"p{i}" for i in rng.integers(0, 1 + seed % 3, n)]
    ts = pa.array([None if x < 0.05 else int(x * 10) for x in rng.random(n)], pa.int64())
    t = _batch(keys, parts, ts)
    expected = t.take(pa.array(np.sort(_combine(t, "ts", np.arange(n)))))
    assert latest_per_key(t, "ts").to_pylist() == expected.to_pylist()
    assert latest_per_key(t, None).to_pylist() == t.take(
        pa.array(np.sort(_combine(t, None, np.arange(n))))).to_pylist()


def test_keys_this_process_wrote_are_not_read_back_by_the_next_lookup(tmp_path, monkeypatch):
    """The file-group writer keeps the record keys of the blocks and (local) base files it
    writes in the footer cache, under the keys the index asks for: the next upsert in the
    process reads no key column back, and tags exactly as a cold process does."""
    from streamer.index.footer_cache import CACHE
    from streamer.index.slice_members import Member
    from streamer.write import HudiWriter, TableConfig, WriteOptions

    def batch(ids, ts):
        return pa.table({"id": ids, "city": ["sf" if i % 2 else "nyc" for i in ids], "ts": [ts] * len(ids),
                         "v": [f"v{ts}-{i}" for i in ids]})

    loads: list[str] = []
    real = Member.keys

    def spy(self, stats):
        before = CACHE.misses
        out = real(self, stats)
        if CACHE.misses > before:
            loads.append(self.member_id)
        return out

    monkeypatch.setattr(Member, "keys", spy)
    CACHE.clear()
    path = str(tmp_path / "t")
    w = HudiWriter.create(path, TableConfig("t", ("id",), ("city",), "ts"), options=WriteOptions(engine="local"))
    w.upsert(batch(list(range(0, 2000)), 1))  # base files
    w.upsert(batch(list(range(0, 2000, 3)) + list(range(2000, 3000)), 2))  # updates + inserts: blocks
    loads.clear()
    w.upsert(batch(list(range(1, 3000, 2)), 3))
    assert loads == [], "every key column the lookup matched was in memory"

    # a cold process reads them and ends with the same table
    CACHE.clear()
    HudiWriter.open(path).upsert(batch(list(range(0, 3000, 5)), 4))
    assert loads, "a cold lookup reads key columns"
    from tests.support.write_model import read_hudi_rs

    model: dict[str, str] = {}
    for ids, ts in ((range(0, 2000), 1), (list(range(0, 2000, 3)) + list(range(2000, 3000)), 2),
                    (range(1, 3000, 2), 3), (range(0, 3000, 5), 4)):
        model.update((str(i), f"v{ts}-{i}") for i in ids)
    got = read_hudi_rs(path).to_pylist()  # an independent reader, against the model
    assert len(got) == 3000 and len({r["_hoodie_record_key"] for r in got}) == 3000
    latest = {r["_hoodie_record_key"]: r["v"] for r in got}
    assert latest == model
    assert latest["5"] == "v4-5" and latest["7"] == "v3-7" and latest["2999"] == "v3-2999" and latest["2"] == "v1-2"


@pytest.mark.parametrize("span", [1, 2, 9, 1_000])
@pytest.mark.parametrize("repeat", [False, True])
def test_distinct_integers_are_told_apart_by_marks_or_by_sorting(span, repeat):
    """Ids within a few times their count of each other are marked, others sorted: the
    same answer as counting unique values, at the int64 extremes too."""
    rng = np.random.default_rng(span)
    n = 500
    values = rng.choice(n * span, n, replace=False).astype(np.int64) - 7
    if repeat:
        values[-1] = values[3]
    assert _distinct(values) == (not repeat)
    extremes = np.array([np.iinfo(np.int64).min, 0, np.iinfo(np.int64).max])
    assert _distinct(extremes) and not _distinct(np.append(extremes, 0))


@pytest.mark.parametrize(("n_parts", "n_files"), [(3, 5), (400, 400)])
def test_each_update_goes_to_the_task_of_its_partition_and_file_group(n_parts, n_files):
    """The (partition, file id) pairs of the updates are counted when their codes are few
    and sorted when partitions x file ids is wide: every row gets its pair's task."""
    from streamer.write.plan import OP_INSERT, OP_UPDATE, _assign_touched

    rng = np.random.default_rng(n_parts)
    n = 3_000
    parts = pa.array([f"p{i}" for i in rng.integers(0, n_parts, n)]).dictionary_encode()
    fids = pa.array([f"f{i}" for i in rng.integers(0, n_files, n)])
    ops = np.where(rng.random(n) < 0.7, OP_UPDATE, OP_INSERT).astype(np.int8)
    asked: list[tuple[str, str]] = []

    def existing_task(part: str, fid: str) -> int:
        asked.append((part, fid))
        return hash((part, fid)) % 100_000

    task_ids = np.full(n, -1, dtype=np.int32)
    _assign_touched(ops, parts, fids, existing_task, task_ids)
    p, f = parts.to_pylist(), fids.to_pylist()
    for i in range(n):
        want = hash((p[i], f[i])) % 100_000 if ops[i] == OP_UPDATE else -1
        assert task_ids[i] == want
    assert len(asked) == len(set(asked)), "each pair is asked once"

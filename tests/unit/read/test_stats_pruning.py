"""Filtered reads prune base rows and row groups before the merge, and stay exact (issue 13).

The rule (``streamer.read.slice_reader``'s module doc): a base row or row group may be
dropped before merging only when the filter rules it out *and* no log data record names
its key. The oracle everywhere: the unfiltered snapshot, merged, then filtered by Arrow.
Tables use event-time ordering with updates whose ordering value is sometimes *lower*
than the base's (they lose the merge), so a pruned base row that wins would show up.
"""

from __future__ import annotations

import datetime
import glob
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamer.read import Table
from streamer.read.slice_reader import SliceReadSpec, _read_base_pruned
from streamer.table.merge import MergeSpec, ScanStats
from streamer.write import HudiWriter, TableConfig, WriteOptions

SCHEMA = pa.schema([("id", pa.int64()), ("city", pa.string()), ("ts", pa.int64()), ("fare", pa.float64())])
CITIES = np.array(["sf", "nyc", "oslo"])
OPTS = WriteOptions(engine="local")


def _rows(ids: np.ndarray, ts: np.ndarray, fare: np.ndarray) -> pa.Table:
    return pa.table({"id": ids.astype(np.int64), "city": CITIES[ids % len(CITIES)], "ts": ts.astype(np.int64),
                     "fare": fare}, schema=SCHEMA)


def _grow(path: str, seed: int, n: int = 300, row_group: int = 16) -> Table:
    """Base files (rewritten with many small row groups), then updates - some older than
    the base (ts 0: they lose), some newer - and deletes, in log blocks."""
    rng = np.random.default_rng(seed)
    w = HudiWriter.create(path, TableConfig("prune", ("id",), ("city",), "ts"), schema=SCHEMA, options=OPTS)
    ids = np.arange(n)
    w.bulk_insert(_rows(ids, np.full(n, 10), rng.random(n) * 100))
    for f in glob.glob(os.path.join(path, "*", "*.parquet")):  # same rows and footer, small row groups
        t = pq.read_table(f)
        pq.write_table(t, f, row_group_size=row_group)
    for _ in range(3):
        upd = np.sort(rng.choice(n, n // 5, replace=False))
        ts = np.where(rng.random(len(upd)) < 0.4, 0, 20 + rng.integers(0, 5, len(upd)))
        w.upsert(_rows(upd, ts, rng.random(len(upd)) * 100))
    new = np.arange(n, n + n // 10)  # inserts: log blocks or new files
    w.upsert(_rows(new, np.full(len(new), 30), rng.random(len(new)) * 100))
    dels = rng.choice(n, n // 20, replace=False)
    w.delete(pa.table({"id": dels.astype(np.int64), "city": CITIES[dels % len(CITIES)]}))
    return Table.open(path)


def _canon(t: pa.Table) -> list[tuple]:
    return sorted(zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True))


FILTERS = [
    pc.field("fare") > 50,
    (pc.field("city") == "sf") & (pc.field("fare") > 50),
    (pc.field("id") < 40) | (pc.field("id") > 280),  # key ranges: whole row groups ruled out
    (pc.field("ts") < 15) & (pc.field("fare") < 30),  # base versions that beat older updates
    pc.field("ts") >= 20,
    ~(pc.field("fare") > 10),
]


@pytest.fixture(scope="module")
def grown(tmp_path_factory) -> Table:
    return _grow(str(tmp_path_factory.mktemp("stats") / "t"), seed=3)


@pytest.mark.parametrize("expr", FILTERS, ids=[str(f) for f in FILTERS])
def test_filtered_projected_read_equals_filtering_the_snapshot(grown, expr):
    expected = grown.read().filter(expr).select(["id", "fare"])
    result = grown.scan(columns=["id", "fare"], filter=expr)
    assert result.table.column_names == ["id", "fare"]
    assert _canon(result.table) == _canon(expected)


def test_row_groups_without_log_keys_are_skipped(tmp_path):
    """Base ts is 10 everywhere, so ``ts > 15`` rules out every base row group by
    statistics; only those whose key range holds an updated key are read, and the
    updates (newer, older, deleted) come out as the unfiltered merge says."""
    path = str(tmp_path / "t")
    w = HudiWriter.create(path, TableConfig("prune", ("id",), ("city",), "ts"), schema=SCHEMA, options=OPTS)
    w.bulk_insert(_rows(np.arange(300), np.full(300, 10), np.arange(300) / 3))
    for f in glob.glob(os.path.join(path, "*", "*.parquet")):
        pq.write_table(pq.read_table(f), f, row_group_size=10)
    w.upsert(_rows(np.array([3, 4, 5]), np.array([20, 0, 20]), np.array([1.0, 2.0, 3.0])))
    w.delete(pa.table({"id": pa.array([5], pa.int64()), "city": pa.array([CITIES[5 % 3]])}))
    t = Table.open(path)
    expr = pc.field("ts") > 15
    result = t.scan(columns=["id", "ts"], filter=expr)
    assert _canon(result.table) == _canon(t.read().filter(expr).select(["id", "ts"])) == [(3, 20)]
    assert result.stats.base_row_groups_pruned >= 27  # 30 groups; at most 3 hold an updated key
    assert result.stats.base_rows_pruned > 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), which=st.sampled_from(range(len(FILTERS))), group=st.sampled_from([4, 16, 64]))
def test_pruned_equals_unpruned_on_random_tables(tmp_path_factory, seed, which, group):
    t = _grow(str(tmp_path_factory.mktemp("prop") / "t"), seed, n=120, row_group=group)
    expr = FILTERS[which]
    assert _canon(t.read(columns=["id", "ts", "fare"], filter=expr)) == _canon(
        t.read().filter(expr).select(["id", "ts", "fare"]))


def _spec(expr: pc.Expression) -> SliceReadSpec:
    return SliceReadSpec(merge=MergeSpec(record_key_fields=("k",), populate_meta_fields=False),
                         completed=frozenset(), filter=expr, filter_columns=("k", "v"))


def test_a_row_group_a_log_key_falls_in_is_read_whole(tmp_path):
    """Row groups ruled out by ``v`` are read only if a log key lies in their key range,
    and then only the rows a log key names survive next to the filter's."""
    path = str(tmp_path / "base.parquet")
    pq.write_table(pa.table({"k": pa.array(range(100), pa.int64()), "v": pa.array([i // 10 for i in range(100)])}),
                   path, row_group_size=10)
    from streamer.fs import resolve

    fs, _ = resolve(path)
    stats = ScanStats()
    got = _read_base_pruned(fs, path, _spec(pc.field("v") == 9), ["k", "v"],
                            pa.chunked_array([pa.array([15, 47], pa.int64())]), stats)
    assert sorted(got.column("k").to_pylist()) == [15, 47, *range(90, 100)]
    assert stats.base_row_groups_pruned == 7  # groups 0, 2, 3, 5, 6, 7, 8 not read
    assert stats.base_rows_pruned == 18  # of groups 1 and 4, only keys 15 and 47 kept


def test_no_key_statistics_keeps_the_row_group(tmp_path):
    path = str(tmp_path / "base.parquet")
    pq.write_table(pa.table({"k": pa.array(range(20), pa.int64()), "v": pa.array([0] * 20)}),
                   path, row_group_size=10, write_statistics=["v"])
    from streamer.fs import resolve

    fs, _ = resolve(path)
    stats = ScanStats()
    got = _read_base_pruned(fs, path, _spec(pc.field("v") == 1), ["k", "v"],
                            pa.chunked_array([pa.array([3], pa.int64())]), stats)
    assert got.column("k").to_pylist() == [3]
    assert stats.base_row_groups_pruned == 0  # unknown key ranges: both groups read


def test_a_filter_arrow_cannot_apply_is_not_called_corruption(grown):
    """A type-mismatched filter fails as a query error would, not as a damaged base file."""
    from streamer.errors import CorruptDataError

    with pytest.raises(Exception) as e:
        grown.read(columns=["id"], filter=pc.field("fare") > pa.scalar(datetime.date(2024, 1, 1)))
    assert not isinstance(e.value, CorruptDataError)

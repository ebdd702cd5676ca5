"""Smoke tests of issue 13's benchmark code at tiny sizes: it runs and reports what it
says it reports. No time assertions (benchmarks measure, tests do not)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks import bench_growth, bench_rfc48


@pytest.mark.parametrize("sink", bench_growth.SINKS)
def test_growth_child_grows_and_upserts(tmp_path: Path, sink: str) -> None:
    work = tmp_path / sink
    work.mkdir()
    g = bench_growth.child_grow(sink, str(work), [0, 3000], 1000, 2, seed=1)
    assert g["grow_s"] >= 0
    assert (work / "at-0").is_dir() and (work / "at-3000").is_dir()
    samples = []
    for size in (0, 3000):
        run = tmp_path / f"run-{size}"
        import shutil

        shutil.copytree(work / f"at-{size}", run)
        r = bench_growth.child_upsert(sink, str(run), size, 500, 1, True, False)
        assert r["rows"] == 500 and r["bytes"] > 0 and r["parquet_bytes"] > 0 and r["peak_rss"] > 0
        assert ("warm_cpu" in r) == (sink in ("bloom", "bucket"))
        samples.append(r)
    rows = bench_growth.summarise(samples)
    assert [r["size"] for r in rows] == [0, 3000]


def test_growth_upsert_updates_existing_keys_and_tables_render() -> None:
    b = bench_growth.upsert_batch(10_000, 1000, seed=3)
    ids = b.column("id").to_numpy()
    assert (ids < 10_000).sum() == 300 and (ids >= 10_000).sum() == 700
    samples = [{"size": s, "sink": k, "wall": 1.0, "cpu": 0.5, "peak_rss": 2**27, "rss_before": 2**26,
                "bytes": 1500, "parquet_bytes": 1000} for s in (0, 100) for k in bench_growth.SINKS]
    rows = bench_growth.summarise(samples)
    text = "\n".join(bench_growth.tables(rows) + bench_growth.targets(rows))
    assert "ours, bucket index" in text and "1.50x" in text


def test_rfc48_runs_every_policy(tmp_path: Path) -> None:
    a = argparse.Namespace(parts=2, base_rows=2000, commits=4, rows=100, bound=2, full_every=4, read_every=2,
                           seed=1)
    base = str(tmp_path / "base")
    bench_rfc48.build_base(base, a.parts, a.base_rows, a.seed)
    outs = {n: bench_rfc48.run_one(n, base, str(tmp_path), a, log=lambda m: None) for n in bench_rfc48.POLICIES}
    assert all(o.rows == 4000 for o in outs.values())
    assert outs["none"].service_bytes == 0 and max(outs["none"].units) == 8
    assert outs["compaction-only"].compactions >= 1 and outs["log+rare-full"].log_compactions >= 1
    lines = bench_rfc48.lines_for(list(outs.values()), a, "cmd", "b", "a", 0.0)
    assert any(line.startswith("| log+rare-full |") for line in lines)


def test_before_child_upserts_with_the_trees_code(tmp_path: Path) -> None:
    """bench_before's child runs a tree's code on a copy of a table and reports its cost;
    here the tree is this checkout and the table a bloom table bench_growth grew."""
    from benchmarks import bench_before

    work = tmp_path / "bloom"
    work.mkdir()
    bench_growth.child_grow("bloom", str(work), [3000], 1000, 2, seed=1)
    here = Path(bench_before.__file__).resolve().parents[1]
    wall, cpu, written = bench_before.one(here, str(work / "at-3000"), 3000, 500, 1,
                                          bench_growth.UPSERT_TS, tmp_path)
    assert wall > 0 and cpu > 0 and written > 0
    assert not (tmp_path / "run" / ".hoodie").samefile(work / "at-3000" / ".hoodie"), "a copy, not the table"


def test_large_child_and_report():
    from benchmarks import bench_large

    runs = {k: [bench_large.child(k, 2000, [2000, 2000], seed=1)] for k in bench_large.SINKS}
    for (r,) in runs.values():
        assert [u["table_rows"] for u in r["upserts"]] == [2000, 3400]
        assert r["peak_rss_mb"] >= r["base_rss_mb"] > 0
    big = {"ours": dict(bench_large.child("ours", 2000, [6000], seed=2), big_rows=6000)}
    lines = bench_large.report(bench_large.summarise({"runs": runs}), big, 2000, 1)
    text = "\n".join(lines)
    assert "ours / delta-rs CPU" in text and "one upsert of 6,000 rows" in text


@pytest.mark.integration
def test_debezium_decode_variants_all_return_every_record(spark, tmp_path: Path) -> None:
    from benchmarks import bench_debezium_decode as bench

    bench.raw_batch(300, tmp_path / "raw.parquet")
    raw = spark.read.parquet(str(tmp_path / "raw.parquet"))
    runs = bench.variants(spark, raw)
    assert len(runs) == 3 and all(fn() == 300 for fn in runs.values())


def test_history_runs_merged_and_not(tmp_path: Path) -> None:
    from benchmarks import bench_history

    merged = bench_history.run(str(tmp_path / "m"), 25, 2, 10, batch=10)
    flat = bench_history.run(str(tmp_path / "f"), 25, 2, 10, batch=1000)
    assert (flat["files"], flat["layers"]) == (25, 0)
    assert merged["files"] < 10 and merged["layers"] == 1 and merged["manifest"] < flat["manifest"]

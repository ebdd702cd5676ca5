"""Upsert throughput and commit latency, beside plain Parquet append and a Delta MERGE.

One run, same generated data for all three sinks: an initial load, then upsert
batches of 10k and 1M records with 30% updates (keys already in the table) and 70%
inserts. Measures, never asserts. Appends a "Write: upsert throughput" section to
``benchmarks/RESULTS.md`` (replacing an older one) with the exact command.

    .venv/bin/python -m benchmarks.bench_write [--sizes 10000,1000000] [--batches 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streamer.write import HudiWriter, TableConfig, WriteOptions

RESULTS = Path(__file__).with_name("RESULTS.md")
HEADING = "## Write: upsert throughput"
CITIES = np.array(["sf", "nyc", "chennai", "oslo", "lima", "pune", "rome", "oslo2"])
READING = [
    "Reading: a mor-streamer upsert pays for what the peers skip - combining duplicates, a bloom",
    "index lookup over base files and log blocks (footers, then key columns), Hudi meta columns,",
    "per-block and cumulative bloom filters in every Parquet block, markers and an atomic commit.",
    "Where the time goes in the 1M case (cProfile, one thread): Parquet encoding of the blocks,",
    "building the two bloom filters of each block (one shared hash chain), the slice-summary",
    "probes and key-column matching of the lookup, then combining/sorting. The two cores are",
    "shared with other jobs, so absolute latencies are noisy; compare sinks within one run.",
]


def make_batch(rng: np.random.Generator, n: int, existing_max: int, next_id: int, ts: int,
               update_frac: float = 0.3) -> tuple[pa.Table, int]:
    n_upd = int(n * update_frac) if existing_max > 0 else 0
    upd_ids = rng.choice(existing_max, n_upd, replace=False) if n_upd else np.empty(0, np.int64)
    new_ids = np.arange(next_id, next_id + n - n_upd)
    ids = np.concatenate([upd_ids, new_ids]).astype(np.int64)
    table = pa.table(
        {
            "id": ids,
            "city": CITIES[ids % len(CITIES)],
            "ts": np.full(len(ids), ts, dtype=np.int64),
            "rider": pa.array(np.char.add("rider-", (ids % 9973).astype(str))),
            "fare": rng.random(len(ids)) * 100,
            "distance": rng.random(len(ids)) * 30,
        }
    )
    return table, next_id + len(new_ids)


def bench_hudi(root: Path, batches: list[pa.Table]) -> list[float]:
    path = str(root / "hudi")
    opts = WriteOptions(engine="local", parallelism=os.cpu_count() or 2)
    w = HudiWriter.create(path, TableConfig("bench", ("id",), ("city",), "ts"), options=opts)
    out = []
    for b in batches:
        t = time.perf_counter()
        w.upsert(b)
        out.append(time.perf_counter() - t)
    return out


def bench_parquet(root: Path, batches: list[pa.Table]) -> list[float]:
    """Plain append, no keys: the floor any upsert is paid on top of."""
    out = []
    for i, b in enumerate(batches):
        t = time.perf_counter()
        pq.write_to_dataset(b, str(root / "parquet"), partition_cols=["city"],
                            basename_template=f"b{i}-{{i}}.parquet", compression="snappy")
        out.append(time.perf_counter() - t)
    return out


def bench_delta(root: Path, batches: list[pa.Table]) -> list[float] | None:
    try:
        from deltalake import DeltaTable, write_deltalake
    except ImportError:
        return None
    path = str(root / "delta")
    out = []
    for i, b in enumerate(batches):
        t = time.perf_counter()
        if i == 0:
            write_deltalake(path, b, partition_by=["city"])
        else:
            (
                DeltaTable(path)
                .merge(b, predicate="t.id = s.id AND t.city = s.city", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        out.append(time.perf_counter() - t)
    return out


def run(sizes: list[int], n_batches: int, seed: int = 42) -> list[dict]:
    rows = []
    for size in sizes:
        rng = np.random.default_rng(seed)
        batches, next_id, max_id = [], 0, 0
        for k in range(n_batches + 1):  # batch 0 is the initial load
            b, next_id = make_batch(rng, size, max_id, next_id, ts=k + 1)
            max_id = next_id
            batches.append(b)
        root = Path(tempfile.mkdtemp(prefix=f"bench_write_{size}_"))
        try:
            for sink, fn in (("mor-streamer upsert (local engine)", bench_hudi),
                             ("plain Parquet append", bench_parquet),
                             ("Delta Lake MERGE (deltalake)", bench_delta)):
                lat = fn(root, batches)
                if lat is None:
                    continue
                steady = lat[1:]  # upserts after the initial load
                recs = size * len(steady)
                rows.append({
                    "size": size, "sink": sink,
                    "load_s": lat[0],
                    "median_s": float(np.median(steady)), "max_s": float(np.max(steady)),
                    "rps": recs / sum(steady),
                })
                print(f"{size:>9} {sink:<38} load {lat[0]:7.2f}s  commit p50 {np.median(steady):7.2f}s "
                      f"max {np.max(steady):7.2f}s  {recs / sum(steady):>10,.0f} rec/s", flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return rows


def write_results(rows: list[dict], command: str) -> None:
    lines = [
        HEADING, "",
        f"Command: `{command}`  ",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"pyarrow {pa.__version__}. Local filesystem. Each batch: 30% updates of existing keys, "
        "70% new keys, 8 partitions; the first batch of each size is the initial load (not counted).",
        "",
        "| batch | sink | initial load (s) | commit latency p50 (s) | max (s) | upsert throughput (rec/s) |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['size']:,} | {r['sink']} | {r['load_s']:.2f} | {r['median_s']:.2f} | "
                     f"{r['max_s']:.2f} | {r['rps']:,.0f} |")
    lines += ["", *READING, "", ""]  # a blank line before the next section
    section = "\n".join(lines)
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\n"
    if HEADING in text:
        start = text.index(HEADING)
        nxt = text.find("\n## ", start + len(HEADING))
        text = text[:start] + section + (text[nxt + 1:] if nxt >= 0 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="10000,1000000")
    ap.add_argument("--batches", type=int, default=3, help="upsert batches after the initial load")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = run(sizes, args.batches)
    if not args.no_write:
        write_results(rows, " ".join([".venv/bin/python -m benchmarks.bench_write", *sys.argv[1:]]))


if __name__ == "__main__":
    main()

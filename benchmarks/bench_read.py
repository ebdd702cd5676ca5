"""Snapshot read of a generated MOR table: our reader beside hudi-rs, same table, same run.

The table (written by our MOR writer) has ``--records`` rows in several file groups,
each with ``--update-batches`` Parquet log blocks of updates and a few deletes on top
of its base file, so a snapshot read really merges. Each read runs in a fresh child
process, so wall time and peak RSS (``ru_maxrss``) belong to that reader alone; the
median of ``--repeat`` runs is reported. Measures, never asserts.

    .venv/bin/python -m benchmarks.bench_read [--records 1000000] [--update-batches 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.results import machine_line, write_section

HEADING = "## Read: snapshot, ours vs hudi-rs"
CITIES = np.array(["sf", "nyc", "ams", "oslo"])


def generate(path: str, records: int, update_batches: int, seed: int = 7) -> dict:
    from streamer.table.fsview import FileSystemView  # noqa: F401 - imported for stats below
    from streamer.write import HudiWriter, TableConfig, WriteOptions

    rng = np.random.default_rng(seed)
    ids = np.arange(records, dtype=np.int64)

    def rows(idx: np.ndarray, ts: int) -> pa.Table:
        return pa.table({
            "id": idx,
            "city": CITIES[idx % len(CITIES)],
            "ts": np.full(len(idx), ts, dtype=np.int64),
            "rider": pa.array(np.char.add("rider-", (idx % 9973).astype(str))),
            "fare": rng.random(len(idx)) * 100,
            "note": pa.array(np.char.add("trip note ", (idx % 101).astype(str))),
        })

    opts = WriteOptions(engine="local", max_file_size=24 * 1024**2, small_file_limit=8 * 1024**2)
    w = HudiWriter.create(path, TableConfig("bench_read", ("id",), ("city",), "ts"), options=opts)
    t = time.perf_counter()
    w.bulk_insert(rows(ids, 1))
    for b in range(update_batches):
        upd = np.sort(rng.choice(records, records // 10, replace=False))
        w.upsert(rows(upd, 2 + b))
    dels = rng.choice(records, records // 100, replace=False)
    w.delete(pa.table({"id": dels, "city": CITIES[dels % len(CITIES)]}))
    gen_s = time.perf_counter() - t

    from streamer.read import Table

    table = Table.open(path)
    slices = table.fsview.latest_merged_slices()
    return {
        "gen_s": gen_s,
        "file_groups": len(slices),
        "log_files": sum(len(s.log_files) for s in slices),
        "blocks_per_group": (update_batches + 1),
    }


def child(reader: str, path: str) -> None:
    """Run one read; print JSON with the wall time, rows and a checksum."""
    if reader == "ours":
        from streamer.read import Table
    else:
        import hudi
    t = time.perf_counter()
    if reader == "ours":
        out = Table.open(path).read()
    else:
        batches = hudi.HudiTableBuilder.from_base_uri(path).build().read()
        out = pa.Table.from_batches(batches) if not isinstance(batches, pa.Table) else batches
    secs = time.perf_counter() - t
    fare = pc.sum(out.column("fare")).as_py()
    print(json.dumps({"s": secs, "rows": out.num_rows, "fare_sum": round(fare, 3)}))


def measure(reader: str, path: str, repeat: int) -> dict:
    times, rss, result = [], [], None
    for _ in range(repeat):
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_read", "--child", reader, path],
            stdout=subprocess.PIPE, text=True,
        )
        out = proc.stdout.read() if proc.stdout else ""
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise RuntimeError(f"{reader} read failed (exit {proc.returncode})")
        r = json.loads(out.strip().splitlines()[-1])
        times.append(r["s"])
        rss.append(usage.ru_maxrss)
        result = r
    return {"median_s": statistics.median(times), "min_s": min(times), "peak_rss_mb": max(rss) / 1024, **(result or {})}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--update-batches", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", nargs=2, metavar=("READER", "PATH"), help=argparse.SUPPRESS)
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    with tempfile.TemporaryDirectory(prefix="bench-read-") as tmp:
        path = str(Path(tmp) / "table")
        info = generate(path, args.records, args.update_batches)
        print(f"generated {args.records:,} records in {info['gen_s']:.1f}s: {info}", flush=True)
        # hudi-rs first, then ours, so neither benefits from a warmer page cache only.
        rs = measure("hudi-rs", path, args.repeat)
        ours = measure("ours", path, args.repeat)
    print(json.dumps({"ours": ours, "hudi-rs": rs}, indent=1))
    same = ours["rows"] == rs["rows"] and ours["fare_sum"] == rs["fare_sum"]
    body = [
        f"Command: `.venv/bin/python -m benchmarks.bench_read {' '.join(sys.argv[1:])}`".replace(" `", " `").rstrip(),
        "",
        f"{machine_line()} Table: {args.records:,} records written by our MOR writer "
        f"(bulk insert, then {args.update_batches} upsert batches of {args.records // 10:,} updates and one "
        f"delete batch of {args.records // 100:,} keys): {info['file_groups']} file groups, "
        f"{info['log_files']} log files. Each read in a fresh process; median of {args.repeat}.",
        "",
        "| reader | rows | median (s) | best (s) | peak RSS (MiB) |",
        "|---|---:|---:|---:|---:|",
        f"| mor-streamer `Table.read()` | {ours['rows']:,} | {ours['median_s']:.2f} | {ours['min_s']:.2f} | {ours['peak_rss_mb']:.0f} |",
        f"| hudi-rs `HudiTable.read()` | {rs['rows']:,} | {rs['median_s']:.2f} | {rs['min_s']:.2f} | {rs['peak_rss_mb']:.0f} |",
        "",
        f"Ratio ours / hudi-rs (median time): **{ours['median_s'] / rs['median_s']:.2f}x**. "
        f"Same rows and same sum(fare): {'yes' if same else 'NO'}.",
    ]
    if not args.no_write:
        write_section(HEADING, body)


if __name__ == "__main__":
    main()

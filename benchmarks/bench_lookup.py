"""Rows by key: ``Table.lookup`` of ``--keys`` keys beside a full scan that finds the same rows.

The table is ``benchmarks/bench_read_filtered``'s (8 city partitions, ``--records`` rows
grown by bulk inserts, two 100k upserts into log blocks, 10,000 deletes). ``--keys``
record keys are drawn at random from the ids written (some of them deleted since, some
never written), and read two ways, each in a fresh child process (CPU of the whole
process, all threads, imports excluded):

* **lookup**: ``Table.lookup(keys)`` - the bloom index names the file groups that may
  hold each key, in every partition, and only those slices are read and merged;
* **scan**: the snapshot read with ``_hoodie_record_key IN keys`` as its filter (our
  reader prunes row groups by statistics, reads and merges every slice otherwise).

Both must return the same rows. Measures, never asserts.

    .venv/bin/python -m benchmarks.bench_lookup [--records 10000000] [--keys 1000] [--table PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

COLUMNS = ["id", "city", "fare"]


def child(how: str, path: str, keys_file: str) -> None:
    from streamer.read import Table

    keys = pa.array(json.loads(Path(keys_file).read_text()), pa.string())
    cpu, t = time.process_time(), time.perf_counter()
    table = Table.open(path)
    if how == "lookup":
        found = table.lookup(keys, columns=COLUMNS)
        rows, read, total = found.rows, found.slices_read, found.slices_total
    elif how == "full":  # the whole snapshot, the keys picked afterwards
        scanned = table.scan(columns=[*COLUMNS, "_hoodie_record_key"])
        rows = scanned.table.filter(pc.is_in(scanned.table.column("_hoodie_record_key"), value_set=keys))
        read, total = scanned.stats.file_slices, None
    else:
        scanned = table.scan(columns=COLUMNS, filter=pc.field("_hoodie_record_key").isin(keys))
        rows, read, total = scanned.table, scanned.stats.file_slices, None
    cpu, secs = time.process_time() - cpu, time.perf_counter() - t
    ids = sorted(rows.column("id").to_pylist())
    print(json.dumps({"s": secs, "cpu": cpu, "rows": rows.num_rows, "slices_read": read, "slices_total": total,
                      "ids_hash": hash(tuple(ids)) & 0xFFFFFFFF}))


def _run(how: str, path: str, keys_file: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "benchmarks.bench_lookup", "--child", how, path, keys_file],
                          stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=1_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--table", help="the table's folder (grown once, reused when it exists)")
    ap.add_argument("--child", nargs=3, metavar=("HOW", "PATH", "KEYS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    from benchmarks.bench_read_filtered import generate

    with tempfile.TemporaryDirectory(prefix="bench-lookup-") as tmp:
        path = args.table or str(Path(tmp) / "t")
        if not Path(path, ".hoodie").exists():
            secs = generate(path, args.records, 1_000_000, 2)
            print(f"grew {args.records:,} rows in {secs:.0f}s", file=sys.stderr)
        rng = np.random.default_rng(5)
        scenarios = {
            "random": [str(k) for k in rng.choice(args.records + 200_000, args.keys, replace=False)],
            # consecutive ids: written by one bulk insert, so one file group per partition
            "consecutive": [str(k) for k in range(args.records // 2, args.records // 2 + args.keys)],
        }
        for name, keys in scenarios.items():
            keys_file = Path(tmp) / f"{name}.json"
            keys_file.write_text(json.dumps(keys))
            runs: dict[str, list[dict]] = {"lookup": [], "scan": [], "full": []}
            for i in range(args.repeat):
                for how in (("full", "scan", "lookup") if i % 2 else ("lookup", "scan", "full")):
                    runs[how].append(_run(how, path, str(keys_file)))
            lk, sc, fu = runs["lookup"], runs["scan"], runs["full"]
            assert lk[-1]["ids_hash"] == sc[-1]["ids_hash"] == fu[-1]["ids_hash"], (lk[-1], sc[-1], fu[-1])
            cpu = {k: statistics.median(r["cpu"] for r in v) for k, v in runs.items()}
            wall = {k: statistics.median(r["s"] for r in v) for k, v in runs.items()}
            print(f"{name}: {args.keys} keys, {lk[-1]['rows']} rows found in a {args.records:,}-row table")
            print(f"  lookup:        {wall['lookup']:.2f}s wall, {cpu['lookup']:.2f}s CPU, {lk[-1]['slices_read']} of "
                  f"{lk[-1]['slices_total']} file groups read")
            print(f"  filtered scan: {wall['scan']:.2f}s wall, {cpu['scan']:.2f}s CPU (key IN (...) pushed down)")
            print(f"  full scan:     {wall['full']:.2f}s wall, {cpu['full']:.2f}s CPU")
            print(f"  lookup CPU: {cpu['lookup'] / cpu['full']:.1%} of the full scan's, "
                  f"{cpu['lookup'] / cpu['scan']:.1%} of the filtered scan's")
        print(subprocess.run(["uptime"], stdout=subprocess.PIPE, text=True).stdout.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())

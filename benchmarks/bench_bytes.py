"""Bytes written per upsert, beside the Parquet size of the same rows (issue 13, point 2).

A table grown by 1M-row inserts (the data shape of :mod:`benchmarks.bench_write`: 8
partitions, record key ``id``), then one upsert of ``--upsert`` rows (30% updates of
random existing keys, 70% inserts). Reported: the bytes that upsert wrote (its commit's
write stats: log blocks and new base files), split into log and base bytes, and the size
of the same rows as one snappy Parquet file; its wall and CPU seconds with the
process's footer cache cold (the first lookup of the process) and for a second upsert
of the same shape right after (warm: what a long-running pipeline's next micro-batch
pays), with the footers and key columns that second lookup read from storage. Measures,
never asserts.

    .venv/bin/python -m benchmarks.bench_bytes [--sizes 0,1000000] [--upsert 100000] [--prior 0]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from benchmarks.bench_write import make_batch
from benchmarks.results import machine_line, write_section
from streamer.index.footer_cache import CACHE
from streamer.read import Table
from streamer.table.naming import parse_log_file_name
from streamer.write import HudiWriter, TableConfig, WriteOptions

HEADING = "## Write: bytes written per upsert"
GROW = 1_000_000


def measure(size: int, upsert: int, seed: int = 42, prior: int = 0) -> dict:
    """``prior`` upserts of the same shape first: slices with that many more log blocks."""
    rng = np.random.default_rng(seed)
    root = Path(tempfile.mkdtemp(prefix="bench-bytes-"))
    try:
        path = str(root / "t")
        w = HudiWriter.create(path, TableConfig("bench", ("id",), ("city",), "ts"),
                              options=WriteOptions(engine="local", parallelism=os.cpu_count() or 2))
        next_id, ts = 0, 0
        while next_id < size:
            batch, next_id = make_batch(rng, min(GROW, size - next_id), 0, next_id, ts)
            w.insert(batch)
            ts += 1
        for _ in range(prior):
            ts += 1
            batch, next_id = make_batch(rng, upsert, next_id, next_id, ts)
            w.upsert(batch)
        batch, next_id2 = make_batch(rng, upsert, next_id, next_id, ts + 1)
        CACHE.clear()
        cpu, t = time.process_time(), time.perf_counter()
        res = w.upsert(batch)
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
        warm_batch, _ = make_batch(rng, upsert, next_id2, next_id2, ts + 2)
        cpu2, t2 = time.process_time(), time.perf_counter()
        warm = w.upsert(warm_batch)
        wall2, cpu2 = time.perf_counter() - t2, time.process_time() - cpu2
        lk = warm.lookup
        meta = Table.open(path).fsview.commit_metadata(
            next(i for i in Table.open(path).timeline.completed_writes() if i.timestamp == res.instant))
        logs = base = 0
        for st in meta.write_stats():
            if parse_log_file_name((st.path or "").rsplit("/", 1)[-1]) is not None:
                logs += st.total_write_bytes
            else:
                base += st.total_write_bytes
        sink = io.BytesIO()
        pq.write_table(batch, sink, compression="snappy")
        return {"size": size, "upsert": upsert, "logs": logs, "base": base, "parquet": sink.tell(),
                "wall": wall, "cpu": cpu, "wall2": wall2, "cpu2": cpu2,
                "footers2": lk.footers_read if lk is not None else 0,
                "keys2": lk.keys_read if lk is not None else 0}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0,1000000")
    ap.add_argument("--upsert", type=int, default=100_000)
    ap.add_argument("--prior", type=int, default=0,
                    help="upserts before the measured one (more log blocks per file slice)")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = ap.parse_args(argv)
    load = os.getloadavg()
    rows = [measure(int(s), args.upsert, prior=args.prior) for s in args.sizes.split(",")]
    after = os.getloadavg()
    lines = ["| table rows | upsert rows | bytes written (logs + new base) | Parquet of the same rows | ratio "
             "| upsert wall / CPU s (cold) | next upsert wall / CPU s (warm) | its footers / key columns read |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        total = r["logs"] + r["base"]
        lines.append(f"| {r['size']:,} | {r['upsert']:,} | {total / 1e6:.2f} MB ({r['logs'] / 1e6:.2f} + "
                     f"{r['base'] / 1e6:.2f}) | {r['parquet'] / 1e6:.2f} MB | {total / r['parquet']:.2f}x | "
                     f"{r['wall']:.1f} / {r['cpu']:.1f} | {r['wall2']:.1f} / {r['cpu2']:.1f} | "
                     f"{r['footers2']} / {r['keys2']} |")
    print("\n".join(lines))
    if not args.no_write:
        cmd = ".venv/bin/python -m benchmarks.bench_bytes " + " ".join(sys.argv[1:] if argv is None else argv)
        write_section(HEADING, [
            f"`{cmd.strip()}` - {machine_line()}; load average before the run "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, after {after[0]:.2f} {after[1]:.2f} {after[2]:.2f}.",
            "", *lines, "",
            "Bytes are the upsert commit's write stats (totalWriteBytes of its log files and new base "
            "files); the Parquet column is the same rows written once with snappy. Cold: the first "
            "upsert of the process (footer cache empty); warm: the next upsert, whose lookup finds the "
            "footers, parsed filters and key columns of the files it read before in the process's "
            "footer cache (`streamer.index.footer_cache`); the last column counts what it read from "
            "storage.",
            "",
            "Since issue 13, each log block carries its own bloom filter (fpp 1e-6, sized to its keys) "
            "and the key range of its slice's log blocks, no cumulative filter; "
            "`_hoodie_commit_seqno` and `_hoodie_record_key` are written DELTA_BYTE_ARRAY (Apache Hudi "
            "0.15/1.0 and hudi-rs read them: tests/hudi_jvm/test_encodings.py). Per 100k upsert at 1M "
            "rows that removed 0.77 MB of cumulative filters (9.6 MB at 3M), 0.65 MB of seqno and "
            "0.48 MB of record keys, and 0.24 MB of the blocks' own filters (fpp 1e-9 before).",
            "",
            "Many log blocks per slice (`--sizes 1000000 --prior 10 --no-write`: ten upserts first, 11-12 "
            "blocks per slice), same session: 3.83 MB (1.33x), cold/warm CPU 0.8/0.6 s, the warm lookup "
            "reading 16 footers and 192 key columns; before: 10.57 MB (3.67x), 0.7/0.6 s, 176 footers and 192"
            " key columns. Without a cumulative filter a lookup probes every block's own filter (the "
            "candidates' hashing is prepared once per slice); log compaction bounds the blocks per slice.",
            "",
            "Before (commit 49edc1b, the same command in the same session, `--no-write`): 0 rows 5.07 MB "
            "(1.78x), cold/warm CPU 0.3/0.3 s; 1,000,000 rows 5.95 MB (2.07x), 0.4/0.3 s; 3,000,000 rows "
            "14.80 MB (5.14x), 0.7/0.7 s; 10,000,000 rows 14.82 MB (5.13x), 1.8/1.6 s, the warm upsert "
            "reading 88 footers and 104 key columns.",
        ])


if __name__ == "__main__":
    main()

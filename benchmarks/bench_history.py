"""The archive's LSM history (table versions 8 and 9) after many archive runs, with and
without merging its layers (``policies.archive.history_merge_batch``).

Each run publishes one layer-0 file of ``--per-run`` instants (their metadata ``--meta``
bytes each, about a commit's) exactly as the archive does (``Transaction.archive_history``
minus the active timeline's deletes), then merges and cleans as the archive does. Measured:
the latest snapshot's files and manifest bytes, the files left in the folder, the CPU
seconds of all runs and of the last 100, and what reading every archived instant costs
(``lsm_history.read_instants``, as an incremental query past the active timeline does).
Apache Hudi's archiver merges its own history by the same rule (``LSMTimelineWriter
.compactAndClean``, batch 10); without merging, our history grew a file per run.

    .venv/bin/python -m benchmarks.bench_history --runs 2000
"""

from __future__ import annotations

import argparse
import os
import posixpath
import tempfile
import time

from benchmarks.results import machine_line, write_section
from streamer.fs import FileSystem
from streamer.table import lsm_history as h
from streamer.write.transaction import Transaction


def _instants(run: int, per_run: int, meta: int) -> list[h.ArchivedInstant]:
    base = 20260101000000000 + run * per_run * 1000
    return [h.ArchivedInstant(str(base + i * 1000), str(base + i * 1000 + 500), "deltacommit",
                              os.urandom(meta), None) for i in range(per_run)]


def run(folder: str, runs: int, per_run: int, meta: int, batch: int) -> dict[str, float]:
    fs = FileSystem()
    txn = Transaction(fs, folder)
    cpu_last = 0.0
    start = time.process_time()
    for r in range(runs):
        t0 = time.process_time()
        name, data = h.data_file(_instants(r, per_run, meta))
        txn._publish_history(h.read_snapshot(fs, folder), (), name, data)
        txn.merge_history(folder, batch=batch)
        if r >= runs - 100:
            cpu_last += time.process_time() - t0
    total = time.process_time() - start
    snap = h.read_snapshot(fs, folder)
    t0 = time.process_time()
    rows = h.read_instants(fs, snap).num_rows
    read_cpu = time.process_time() - t0
    assert rows == runs * per_run, (rows, runs * per_run)
    manifest = os.path.getsize(posixpath.join(folder, f"{h.MANIFEST_PREFIX}{snap.version}"))
    on_disk = len([n for n in os.listdir(folder) if h.FILE_PATTERN.match(n)])
    return {"files": len(snap.files), "manifest": manifest, "on_disk": on_disk, "cpu": total,
            "cpu_last100": cpu_last, "read_cpu": read_cpu,
            "layers": max(f.layer for f in snap.files)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--per-run", type=int, default=10, help="instants a run archives (max_commits - min_commits)")
    ap.add_argument("--meta", type=int, default=2000, help="bytes of each instant's metadata")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    out = {}
    for label, batch in (("merging (batch 10, the default)", h.MERGE_BATCH), ("not merging (before)", 1 << 30)):
        with tempfile.TemporaryDirectory() as tmp:
            out[label] = run(tmp, args.runs, args.per_run, args.meta, batch)
            print(label, out[label])
    body = [
        f"Command: `.venv/bin/python -m benchmarks.bench_history --runs {args.runs}`  ",
        machine_line() + " Local filesystem.",
        "",
        f"{args.runs} archive runs of {args.per_run} instants each ({args.meta}-byte metadata), each published and "
        "then merged and cleaned as the archive does; CPU is this process's.",
        "",
        "| history | files in the latest snapshot | its manifest (bytes) | data files in the folder | top layer "
        "| CPU, all runs (s) | CPU, last 100 runs (s) | CPU, reading every instant (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, m in out.items():
        body.append(f"| {label} | {m['files']} | {m['manifest']:,} | {m['on_disk']} | {m['layers']} | "
                    f"{m['cpu']:.2f} | {m['cpu_last100']:.3f} | {m['read_cpu']:.3f} |")
    if not args.no_write:
        write_section("## Archive: the LSM history after many runs, merged and not", body)
    print("\n".join(body))


if __name__ == "__main__":
    main()

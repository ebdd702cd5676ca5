"""Upsert throughput beside plain Parquet append, a Delta MERGE and Apache Hudi's own writer.

One run, same generated data for every sink: an initial load, then upsert batches of
10k and 1M records with 30% updates (keys already in the table) and 70% inserts. The
sinks: our writer (local engine, in this process), plain Parquet append, a delta-rs
MERGE, and Apache Hudi 0.15's Spark MOR upsert (bloom index, ``local[2]``) in the
child process of :mod:`tests.support.hudi` when the Hudi environment exists
(``make hudi-env`` + ``make jars``; else the Hudi rows are skipped with the reason).

Per sink and batch size: wall time of each upsert commit (median over the batches) and
CPU seconds of the same commit. For the in-process sinks CPU is ``time.process_time()``
of this process (all its threads). For Hudi the worker times the ``save()`` alone (not
the staging of the rows as Parquet nor the JSON round trip) and reports the Spark JVM's
CPU (utime + stime from ``/proc``; executors run in it in local mode) plus the worker
interpreter's own. Measures, never asserts. Replaces the "Write: upsert throughput"
section of ``benchmarks/RESULTS.md`` with the exact command.

    .venv/bin/python -m benchmarks.bench_write [--sizes 10000,1000000] [--batches 3] [--no-hudi]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.results import machine_line, write_section
from streamer.write import HudiWriter, TableConfig, WriteOptions
from tests.support.hudi import HudiOracleError

HEADING = "## Write: upsert throughput"
CITIES = np.array(["sf", "nyc", "chennai", "oslo", "lima", "pune", "rome", "oslo2"])
OURS = "mor-streamer upsert (local engine)"
OURS_V9 = "mor-streamer upsert, table version 9 (local engine)"
PARQUET = "plain Parquet append"
DELTA = "Delta Lake MERGE (deltalake)"
HUDI = "Hudi 0.15 Spark MOR upsert (bloom, MDT off)"
HUDI_MDT = "Hudi 0.15 Spark MOR upsert (bloom, MDT on)"
#: The metadata-table variant of Hudi runs only up to this batch size (it adds a
#: per-commit cost, not a per-record one; at 1M it would double a long run).
MDT_MAX_SIZE = 100_000
#: Rows of the untimed warm-up load + upsert that Hudi's JVM gets before any timing.
WARMUP_ROWS = 10_000
#: Hudi's options for this table. The metadata table is off by default to compare like
#: with like: our writer keeps no metadata table (it disables and deletes one).
HUDI_OPTIONS = {
    "hoodie.table.name": "bench",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.operation": "upsert",
    "hoodie.index.type": "BLOOM",
    "hoodie.metadata.enable": "false",
    "hoodie.compact.inline": "false",
    "hoodie.upsert.shuffle.parallelism": "2",
    "hoodie.insert.shuffle.parallelism": "2",
}
HUDI_MDT_OPTIONS = dict(HUDI_OPTIONS, **{"hoodie.metadata.enable": "true"})
READING = [
    "Reading: a mor-streamer upsert pays for what the plain peers skip - combining duplicates,",
    "a bloom index lookup over base files and log blocks (footers, then key columns), Hudi meta",
    "columns, per-block and cumulative bloom filters in every Parquet block, markers and an",
    "atomic commit. Where the time goes in the 1M case (cProfile, one thread): Parquet encoding",
    "of the blocks, building the two bloom filters of each block (one shared hash chain), the",
    "slice-summary probes and key-column matching of the lookup, then combining/sorting. Hudi's",
    "own upsert does the same kind of work (dedupe on the precombine field, bloom index,",
    "updates to log files, inserts to new base files, markers, commit) as a series of Spark",
    "jobs in one long-lived JVM (`local[2]`), warmed up first by an untimed 10k load + upsert",
    "of a scratch table (class loading and JIT would otherwise land on the first sink",
    "measured). Its index is lazy: the jobs named after it ('Load latest base files', 'Obtain",
    "key ranges', 'Compute all comparisons') list files, read footers and count candidate",
    "pairs; the bloom probes and key checks against the candidate base files run in the next",
    "action on the tagged records, the job Hudi labels 'Building workload profile'. 'Tagging'",
    "is the save's first action (it reads the staged input and combines duplicates); 'outside",
    "jobs' is the driver's own time between Spark jobs (write client, timeline, commit). Hudi's",
    "CPU seconds are the JVM's (all threads, JIT and GC included) plus its Python worker's. The",
    "two cores are shared with other jobs, so absolute latencies are noisy; compare sinks",
    "within one run, and CPU seconds beside wall time.",
    "",
    "Hudi's metadata table (MDT) is off in the main Hudi row to compare like with like (our",
    "writer keeps none); the 'MDT on' row (Hudi's default, files partition only) is measured",
    "only for batches up to 100,000 records, to bound the run. Hudi options: MERGE_ON_READ,",
    "record key id, partition path city, precombine ts, operation upsert,",
    "hoodie.index.type=BLOOM, hoodie.compact.inline=false, upsert/insert shuffle parallelism 2;",
    "Spark `local[2]` with 2g driver memory; Hudi's default payload, bloom filter and file",
    "sizing.",
]

Sample = dict  # {"wall": s, "cpu": s or None, ...}: one commit


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


def _timed(fn: Callable[[], object]) -> Sample:
    """Wall and CPU seconds (this process, all threads) of ``fn()``."""
    cpu, t = time.process_time(), time.perf_counter()
    fn()
    return {"wall": time.perf_counter() - t, "cpu": time.process_time() - cpu}


def bench_ours(root: Path, batches: list[pa.Table], version: int = 6) -> list[Sample]:
    """Our writer at table ``version`` (6 is the default table; 9 writes Avro commit
    metadata, a layout-2 timeline and one log file per commit)."""
    path = str(root / f"ours_v{version}")
    opts = WriteOptions(engine="local", parallelism=os.cpu_count() or 2)
    w = HudiWriter.create(path, TableConfig("bench", ("id",), ("city",), "ts", table_version=version), options=opts)
    return [_timed(lambda b=b: w.upsert(b)) for b in batches]


def bench_parquet(root: Path, batches: list[pa.Table]) -> list[Sample]:
    """Plain append, no keys: the floor any upsert is paid on top of."""
    return [
        _timed(lambda i=i, b=b: pq.write_to_dataset(
            b, str(root / "parquet"), partition_cols=["city"],
            basename_template=f"b{i}-{{i}}.parquet", compression="snappy"))
        for i, b in enumerate(batches)
    ]


def bench_delta(root: Path, batches: list[pa.Table]) -> list[Sample] | None:
    try:
        from deltalake import DeltaTable, write_deltalake
    except ImportError:
        print("skipping Delta: deltalake is not installed", flush=True)
        return None
    path = str(root / "delta")

    def one(i: int, b: pa.Table) -> None:
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

    return [_timed(lambda i=i, b=b: one(i, b)) for i, b in enumerate(batches)]


def bench_hudi_spark(root: Path, batches: list[pa.Table], session, options: dict) -> list[Sample]:
    """Hudi's datasource upsert of each batch; timing from the worker (the save alone)."""
    path = str(root / f"hudi-spark-{options['hoodie.metadata.enable']}")
    out = []
    for b in batches:
        a = session.write(path, b, options)
        jvm = a.get("jvm_cpu_s")
        out.append({
            "wall": a["seconds"],
            "cpu": None if jvm is None else jvm + a["py_cpu_s"],
            "jobs": a.get("jobs") or [],
        })
    return out


def start_hudi():
    """A running Hudi 0.15 session, or None (and why, printed)."""
    from tests.support import hudi

    why = hudi.available()
    if why is not None:
        print(f"skipping Hudi 0.15 Spark: {why}", flush=True)
        return None
    t = time.perf_counter()
    try:
        session = hudi.HudiSpark("0.15").start()
    except hudi.HudiOracleError as e:
        print(f"skipping Hudi 0.15 Spark: {e}", flush=True)
        return None
    # Warm the long-lived JVM (class loading, JIT) with an untimed load + upsert of a
    # scratch table, so the first measured sink does not pay for it alone.
    rng = np.random.default_rng(0)
    first, next_id = make_batch(rng, WARMUP_ROWS, 0, 0, ts=1)
    second, _ = make_batch(rng, WARMUP_ROWS, next_id, next_id, ts=2)
    scratch = tempfile.mkdtemp(prefix="bench_write_warmup_")
    try:
        for b in (first, second):
            session.write(f"{scratch}/t", b, HUDI_OPTIONS)
    except hudi.HudiOracleError as e:
        print(f"skipping Hudi 0.15 Spark: warm-up write failed: {e}", flush=True)
        session.stop()
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"Hudi 0.15 Spark {session.spark_version} started and warmed up in "
          f"{time.perf_counter() - t:.1f}s (not counted)", flush=True)
    return session


def _job_label(description: str) -> str:
    if description.startswith("Parallel listing paths"):
        return "marker listing"
    return description.split(":")[0].strip()


def job_breakdown(steady: list[Sample]) -> list[tuple[str, float]]:
    """Median seconds per Hudi job label over the upsert commits, plus 'outside jobs'."""
    per: dict[str, list[float]] = {}
    outside = []
    for s in steady:
        sums: dict[str, float] = {}
        for j in s["jobs"]:
            if j.get("seconds") is not None:
                label = _job_label(j["description"])
                sums[label] = sums.get(label, 0.0) + j["seconds"]
        for label in sums:
            per.setdefault(label, [])
        for label in per:
            per[label].append(sums.get(label, 0.0))
        outside.append(s["wall"] - sum(sums.values()))
    out = sorted(((k, float(np.median(v))) for k, v in per.items()), key=lambda kv: -kv[1])
    return [*out, ("outside jobs", float(np.median(outside)))]


def run(sizes: list[int], n_batches: int, hudi: bool = True, seed: int = 42) -> list[dict]:
    rows = []
    session = start_hudi() if hudi else None
    try:
        for size in sizes:
            rng = np.random.default_rng(seed)
            batches, next_id, max_id = [], 0, 0
            for k in range(n_batches + 1):  # batch 0 is the initial load
                b, next_id = make_batch(rng, size, max_id, next_id, ts=k + 1)
                max_id = next_id
                batches.append(b)
            sinks: list[tuple[str, Callable[[Path, list[pa.Table]], list[Sample] | None]]] = [
                (OURS, bench_ours), (OURS_V9, partial(bench_ours, version=9)),
                (PARQUET, bench_parquet), (DELTA, bench_delta)]
            if session is not None:
                sinks.append((HUDI, partial(bench_hudi_spark, session=session, options=HUDI_OPTIONS)))
                if size <= MDT_MAX_SIZE:
                    sinks.append((HUDI_MDT, partial(bench_hudi_spark, session=session,
                                                    options=HUDI_MDT_OPTIONS)))
            root = Path(tempfile.mkdtemp(prefix=f"bench_write_{size}_"))
            try:
                for sink, fn in sinks:
                    rows.extend(_measure(sink, fn, root, batches, size))
            finally:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        if session is not None:
            session.stop()
    return rows


def _measure(sink: str, fn, root: Path, batches: list[pa.Table], size: int) -> list[dict]:
    try:
        samples = fn(root, batches)
    except HudiOracleError as e:  # Hudi's rows only; the other sinks still run
        print(f"{size:>9} {sink}: failed, row skipped: {e}", flush=True)
        return []
    if samples is None:
        return []
    steady = samples[1:]  # upserts after the initial load
    walls = [s["wall"] for s in steady]
    cpus = [s["cpu"] for s in steady]
    row = {
        "size": size, "sink": sink,
        "load_s": samples[0]["wall"],
        "total_s": sum(x["wall"] for x in samples),
        "n_jobs": float(np.median([len(x["jobs"]) for x in steady])) if "jobs" in steady[0] else None,
        "median_s": float(np.median(walls)), "max_s": float(np.max(walls)),
        "rps": size * len(steady) / sum(walls),
        "cpu_s": None if None in cpus else float(np.median(cpus)),
        "jobs": job_breakdown(steady) if "jobs" in steady[0] else None,
    }
    cpu = "n/a" if row["cpu_s"] is None else f"{row['cpu_s']:7.2f}s"
    print(f"{size:>9} {sink:<44} load {row['load_s']:7.2f}s  commit p50 {row['median_s']:7.2f}s "
          f"max {row['max_s']:7.2f}s  cpu p50 {cpu}  {row['rps']:>10,.0f} rec/s", flush=True)
    if row["jobs"]:
        print("          jobs p50: " + ", ".join(f"{k} {v:.2f}s" for k, v in row["jobs"]), flush=True)
    return [row]


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def observations(rows: list[dict], run_s: float) -> list[str]:
    """Sentences computed from this run's numbers (Hudi beside ours)."""
    out = [f"This run took {run_s / 60:.1f} min in all."]
    ours = {r["size"]: r for r in rows if r["sink"] == OURS}
    for r in rows:
        o = ours.get(r["size"])
        if r["sink"] == OURS_V9 and o and o["cpu_s"] and r["cpu_s"] is not None:
            out.append(f"Table version 9 against 6 at {r['size']:,}: CPU s per commit "
                       f"{r['cpu_s'] / o['cpu_s']:.2f}x, wall p50 {r['median_s'] / o['median_s']:.2f}x.")
    for r in rows:
        if not r["jobs"]:
            continue
        top, top_s = r["jobs"][0] if r["jobs"][0][0] != "outside jobs" else r["jobs"][1]
        outside = dict(r["jobs"])["outside jobs"]
        text = (f"{r['sink']} at {r['size']:,}: its writes (load + upserts) took "
                f"{r['total_s'] / 60:.1f} min; {r['n_jobs']:.0f} Spark jobs per commit, the largest "
                f"'{top}' {top_s:.2f} s of the {r['median_s']:.2f} s p50 "
                f"({100 * top_s / r['median_s']:.0f}%), the driver outside jobs {outside:.2f} s")
        o = ours.get(r["size"])
        if o and o["cpu_s"] and r["cpu_s"] is not None:
            text += (f"; CPU s per commit {r['cpu_s'] / o['cpu_s']:.1f}x ours "
                     f"(wall {r['median_s'] / o['median_s']:.1f}x)")
        out.append(text + ".")
    return out


def write_results(rows: list[dict], command: str, n_batches: int, load_before: str,
                  load_after: str, hudi_note: str | None, run_s: float) -> None:
    body = [
        f"Command: `{command}`  ",
        f"{machine_line()} Local filesystem. Each batch: 30% updates of existing keys, 70% new keys, "
        f"8 partitions; the first batch of each size is the initial load (not counted), then {n_batches} "
        "upsert batches.  ",
        f"Load before (`uptime`): `{load_before}`  ",
        f"Load after: `{load_after}`",
        "",
        "Wall p50 and CPU s are the median over the upsert commits of one commit's wall time and CPU "
        "seconds; records/s is all upserted records over the sum of their wall times; the last column "
        "is wall p50 over ours (same batch size).",
        "",
        "| sink | batch | wall p50 (s) | records/s | CPU s (p50) | wall p50 / ours |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    ours = {r["size"]: r["median_s"] for r in rows if r["sink"] == OURS}
    for r in rows:
        cpu = "n/a" if r["cpu_s"] is None else f"{r['cpu_s']:.2f}"
        ratio = f"{r['median_s'] / ours[r['size']]:.2f}x" if r["size"] in ours else "n/a"
        body.append(f"| {r['sink']} | {r['size']:,} | {r['median_s']:.2f} | {r['rps']:,.0f} | "
                    f"{cpu} | {ratio} |")
    if hudi_note:
        body += ["", hudi_note]
    body += ["", " ".join(observations(rows, run_s))]
    breakdown = [r for r in rows if r["jobs"]]
    if breakdown:
        body += ["", "Hudi's Spark jobs per upsert commit (median seconds of wall time, by Hudi's job description):", ""]
        for r in breakdown:
            jobs = ", ".join(f"{k} {v:.2f}" for k, v in r["jobs"] if v >= 0.005)
            body.append(f"- {r['sink']}, {r['size']:,}: {jobs}")
    body += ["", *READING]
    write_section(HEADING, body)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="10000,1000000")
    ap.add_argument("--batches", type=int, default=3, help="upsert batches after the initial load")
    ap.add_argument("--no-hudi", action="store_true", help="skip Apache Hudi's Spark writer")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    before, t0 = uptime(), time.perf_counter()
    print(before, flush=True)
    rows = run(sizes, args.batches, hudi=not args.no_hudi)
    run_s, after = time.perf_counter() - t0, uptime()
    print(after, flush=True)
    hudi_note = None
    if not args.no_hudi and not any(r["sink"] == HUDI for r in rows):
        from tests.support import hudi

        hudi_note = f"Hudi 0.15 Spark: not measured ({hudi.available() or 'see the run output'})."
    if not args.no_write:
        command = " ".join([".venv/bin/python -m benchmarks.bench_write", *(sys.argv[1:] if argv is None else argv)])
        write_results(rows, command, args.batches, before, after, hudi_note, run_s)


if __name__ == "__main__":
    main()

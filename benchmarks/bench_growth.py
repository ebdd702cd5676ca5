"""Upsert cost as the table grows (issue 13, acceptance 1 and 2): bloom index, bucket index,
delta-rs MERGE and a plain Parquet append, same data, same run.

Each sink's table is grown once by ``--grow``-row batches (the data shape of
:mod:`benchmarks.bench_write`: 8 city partitions, record key ``id``; growth batches are
inserts of new keys) and copied aside at every size of ``--sizes``. Then, at each size and
for each of ``--repeat`` repetitions, the copy is copied again (``cp -r``, not timed) and
one upsert of ``--upsert`` rows (30% updates of random existing keys, 70% inserts; the
same rows for every sink and repetition) runs in a fresh child process, which reports:

* wall and CPU seconds of the upsert alone (``time.process_time()`` of the child: all
  its threads, so delta-rs's and pyarrow's worker threads count), opening the table
  included, imports and generating the rows excluded;
* the child's peak RSS (``VmHWM`` of ``/proc/self/status``), so each sink's memory is its own;
* bytes written: for our writer the commit's write stats (``totalWriteBytes`` of its log
  and base files), for delta-rs and Parquet the data files the upsert created; beside the
  size of the same rows as one snappy Parquet file;
* for our two sinks, a second upsert of the same shape right after in the same process
  ("warm": the process's footer cache holds what the first lookup read - what the next
  micro-batch of a long-running pipeline pays).

Sinks: ``bloom`` (our writer, default bloom index; grown by ``bulk_insert``: base files
only), ``bucket`` (our writer, Hudi's bucket index with ``--buckets`` buckets per partition;
grown by ``insert`` - rows go to their bucket's file group, later batches as log blocks -
and fully compacted at every recorded size, so each bucket is one base file), ``delta``
(delta-rs ``write_deltalake`` appends to grow; ``DeltaTable.merge(...).when_matched_update_all()
.when_not_matched_insert_all().execute()`` to upsert, predicate on id and city) and
``parquet`` (``pq.write_to_dataset`` of the rows, partitioned by city: no keys, the floor).
Measures, never asserts. ``--profile`` adds a cProfile run of our upserts at the largest
size (one thread: ``parallelism=1``; CPU-time profile; not counted in the medians).

    .venv/bin/python -m benchmarks.bench_growth [--sizes 0,1000000,3000000,10000000] [--repeat 3]
        [--buckets 2] [--work DIR] [--save run.json] [--profile] [--no-write]
    .venv/bin/python -m benchmarks.bench_growth --render run.json   # rewrite the section from a saved run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

HEADING = "## Write: upsert cost as the table grows (bloom, bucket, delta-rs, Parquet)"
SINKS = ("bloom", "bucket", "delta", "parquet")
LABELS = {
    "bloom": "ours, bloom index",
    "bucket": "ours, bucket index",
    "delta": "delta-rs MERGE",
    "parquet": "Parquet append",
}
#: Today's figure the bloom target is measured against (issue 13: 7.4 s CPU at 10M).
BLOOM_CPU_BEFORE = 7.4
UPSERT_TS = 1_000_000  # above every growth batch's ts: updates win


# ----------------------------------------------------------------------------- data
def growth_batch(i: int, n: int, start: int, seed: int) -> pa.Table:
    """The ``i``-th growth batch: ``n`` new keys from ``start`` (same rows for every sink)."""
    from benchmarks.bench_write import make_batch

    b, _ = make_batch(np.random.default_rng(seed * 1000 + i), n, 0, start, ts=i + 1)
    return b


def upsert_batch(size: int, n: int, seed: int, which: int = 0) -> pa.Table:
    """The upsert at table size ``size`` (``which`` 1: the warm one after it)."""
    from benchmarks.bench_write import make_batch

    rng = np.random.default_rng([seed, size, which])
    start = size + which * n
    b, _ = make_batch(rng, n, size, start, ts=UPSERT_TS + which)
    return b


# ----------------------------------------------------------------------------- children
def _status(field: str) -> int:
    """A ``/proc/self/status`` figure in bytes (0 where there is none)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _writer_options(parallelism: int | None = None):
    from streamer.write import WriteOptions

    return WriteOptions(engine="local", parallelism=parallelism or os.cpu_count() or 2)


def _table_config(sink: str, buckets: int):
    from streamer.table.identity import IndexConfig, IndexType
    from streamer.write import TableConfig

    cfg = TableConfig("bench_growth", ("id",), ("city",), "ts")
    if sink == "bucket":
        cfg = cfg.with_changes(index=IndexConfig(IndexType.BUCKET, buckets))
    return cfg


def _compact_all(path: str) -> None:
    """One full compaction of every slice with logs (bucket growth: one base file per bucket)."""
    from streamer.config.policies import PoliciesConfig
    from streamer.services.runner import run_services

    pol = PoliciesConfig.model_validate({
        "log_compaction": {"mode": "off"}, "clean": {"mode": "off"}, "archive": {"mode": "off"},
        "compaction": {"mode": "inline", "trigger": {"delta_commits": 1}}})
    run_services(path, pol)


def child_grow(sink: str, work: str, sizes: list[int], grow: int, buckets: int, seed: int) -> dict:
    """Grow ``sink``'s table in ``work/live``; copy it to ``work/at-<size>`` at each size."""
    live = f"{work}/live"
    t0 = time.perf_counter()
    writer = None
    if sink in ("bloom", "bucket"):
        from streamer.write import HudiWriter

        writer = HudiWriter.create(live, _table_config(sink, buckets), options=_writer_options())
    else:
        os.makedirs(live, exist_ok=True)
    rows, i = 0, 0
    for size in sorted(sizes):
        while rows < size:
            n = min(grow, size - rows)
            b = growth_batch(i, n, rows, seed)
            if sink == "bloom":
                writer.bulk_insert(b)
            elif sink == "bucket":
                writer.insert(b)
            elif sink == "delta":
                from deltalake import write_deltalake

                write_deltalake(live, b, partition_by=["city"], mode="append")
            else:
                import pyarrow.parquet as pq

                pq.write_to_dataset(b, live, partition_cols=["city"], basename_template=f"g{i}-{{i}}.parquet",
                                    compression="snappy")
            rows += n
            i += 1
            print(f"  {sink}: grown to {rows:,} rows ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
        if sink == "bucket" and size > 0:
            _compact_all(live)
        shutil.copytree(live, f"{work}/at-{size}", symlinks=True)
    return {"sink": sink, "grow_s": time.perf_counter() - t0}


def _new_files(root: str, before: set[str]) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        if "_delta_log" in dirpath or ".hoodie" in dirpath:
            continue
        for f in files:
            p = os.path.join(dirpath, f)
            if p not in before:
                total += os.path.getsize(p)
    return total


def _listing(root: str) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


def _one_upsert(sink: str, path: str, batch: pa.Table, size: int, profile: str | None = None) -> dict:
    """Time one upsert of ``batch`` into ``path``: wall, CPU, bytes written."""
    before = _listing(path)
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile(time.process_time)  # CPU seconds: the machine's load does not count
    res = None
    cpu, t = time.process_time(), time.perf_counter()
    if prof:
        prof.enable()
    if sink in ("bloom", "bucket"):
        from streamer.write import HudiWriter

        # profiled: one thread, so cProfile (which follows the main thread only) sees it all
        w = HudiWriter.open(path, options=_writer_options(1 if prof else None))
        res = w.upsert(batch)
    elif sink == "delta":
        from deltalake import DeltaTable

        if size == 0:
            dt = DeltaTable.create(path, schema=batch.schema, partition_by=["city"])
        else:
            dt = DeltaTable(path)
        (dt.merge(batch, predicate="t.id = s.id AND t.city = s.city", source_alias="s", target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())
    else:
        import pyarrow.parquet as pq

        pq.write_to_dataset(batch, path, partition_cols=["city"], basename_template="u-{i}.parquet",
                            compression="snappy")
    if prof:
        prof.disable()
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    out = {"wall": wall, "cpu": cpu}
    if res is not None:
        out["bytes"] = sum(s.total_write_bytes for s in res.stats)
        lk = res.lookup
        out["footers"] = getattr(lk, "footers_read", None)
        out["key_columns"] = getattr(lk, "keys_read", None)
    else:
        out["bytes"] = _new_files(path, before)
    if prof:
        import io
        import pstats

        s = io.StringIO()
        st = pstats.Stats(prof, stream=s)
        st.sort_stats("tottime").print_stats(15)
        top_tot = s.getvalue()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(30)
        out["profile"] = {"tottime": top_tot, "cumulative": s.getvalue(), "total": st.total_tt}
    return out


def child_upsert(sink: str, path: str, size: int, n: int, seed: int, warm: bool, profile: bool) -> dict:
    import io

    import pyarrow.parquet as pq

    batch = upsert_batch(size, n, seed)
    sink_buf = io.BytesIO()
    pq.write_table(batch, sink_buf, compression="snappy")
    rss0 = _status("VmRSS")
    out = _one_upsert(sink, path, batch, size, profile="1" if profile else None)
    out.update(sink=sink, size=size, rows=batch.num_rows, parquet_bytes=sink_buf.tell(), rss_before=rss0,
               peak_rss=_status("VmHWM"))
    if warm and sink in ("bloom", "bucket"):
        w2 = _one_upsert(sink, path, upsert_batch(size, n, seed, which=1), size)
        out["warm_wall"], out["warm_cpu"] = w2["wall"], w2["cpu"]
        out["warm_footers"], out["warm_key_columns"] = w2.get("footers"), w2.get("key_columns")
        out["peak_rss_after_warm"] = _status("VmHWM")
    return out


# ----------------------------------------------------------------------------- parent
def _child(args: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).parents[1]),
                                                                     os.environ.get("PYTHONPATH")])))
    p = subprocess.run([sys.executable, "-m", "benchmarks.bench_growth", "--child", json.dumps(args)],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"child {args[:3]} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    sys.stderr.write(p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def run(sizes: list[int], sinks: list[str], repeat: int, upsert: int, grow: int, buckets: int, seed: int,
        work: Path, profile: bool, log=print) -> dict:
    grows = {}
    for sink in sinks:
        d = work / sink
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        g = _child(["grow", sink, str(d), sizes, grow, buckets, seed])
        grows[sink] = g["grow_s"]
        log(f"{sink}: grown to {max(sizes):,} rows in {g['grow_s']:.0f} s")
    samples = []
    for size in sizes:
        for rep in range(repeat):
            for sink in sinks:  # interleaved: load drifts hit every sink alike
                run_dir = work / f"run-{sink}"
                shutil.rmtree(run_dir, ignore_errors=True)
                subprocess.run(["cp", "-r", str(work / sink / f"at-{size}"), str(run_dir)], check=True)
                r = _child(["upsert", sink, str(run_dir), size, upsert, seed, True, False])
                r["rep"] = rep
                samples.append(r)
                shutil.rmtree(run_dir, ignore_errors=True)
                warm = f" warm {r['warm_wall']:.2f}/{r['warm_cpu']:.2f}" if "warm_wall" in r else ""
                log(f"{size:>11,} {sink:<8} rep {rep}: wall {r['wall']:.2f} s  cpu {r['cpu']:.2f} s  "
                    f"peak {r['peak_rss'] / 2**20:.0f} MiB  bytes {r['bytes'] / 1e6:.2f} MB{warm}")
    profiles = {}
    if profile:
        size = max(sizes)
        for sink in ("bloom", "bucket"):
            if sink not in sinks:
                continue
            run_dir = work / f"run-{sink}"
            shutil.rmtree(run_dir, ignore_errors=True)
            subprocess.run(["cp", "-r", str(work / sink / f"at-{size}"), str(run_dir)], check=True)
            r = _child(["upsert", sink, str(run_dir), size, upsert, seed, False, True])
            shutil.rmtree(run_dir, ignore_errors=True)
            profiles[sink] = {"size": size, "wall": r["wall"], "cpu": r["cpu"], **r["profile"]}
            log(f"profile {sink} at {size:,}:\n{r['profile']['tottime']}\n{r['profile']['cumulative']}")
    return {"grow_s": grows, "samples": samples, "profiles": profiles}


def summarise(samples: list[dict]) -> list[dict]:
    """Medians per (size, sink)."""
    out = []
    keys = sorted({(s["size"], s["sink"]) for s in samples}, key=lambda k: (k[0], SINKS.index(k[1])))
    for size, sink in keys:
        ss = [s for s in samples if s["size"] == size and s["sink"] == sink]

        def med(f, ss=ss):
            vals = [s[f] for s in ss if s.get(f) is not None]
            return statistics.median(vals) if vals else None

        out.append({"size": size, "sink": sink, "n": len(ss), **{f: med(f) for f in (
            "wall", "cpu", "peak_rss", "rss_before", "bytes", "parquet_bytes", "warm_wall", "warm_cpu",
            "footers", "key_columns", "warm_footers", "warm_key_columns")}})
    return out


def _f(x: float | None, fmt: str = ".2f", unit: str = "") -> str:
    return "n/a" if x is None else f"{x:{fmt}}{unit}"


def tables(rows: list[dict]) -> list[str]:
    par = {r["size"]: r for r in rows if r["sink"] == "parquet"}
    lines = [
        "| table rows | sink | wall (s) | CPU (s) | peak RSS (MiB) | bytes written (MB) | bytes / Parquet of the rows "
        "| wall / Parquet append | CPU / Parquet append | warm wall / CPU (s) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        p = par.get(r["size"])
        wr = _f(r["wall"] / p["wall"], ".1f", "x") if p and p["wall"] else "n/a"
        cr = _f(r["cpu"] / p["cpu"], ".1f", "x") if p and p["cpu"] else "n/a"
        warm = f"{r['warm_wall']:.2f} / {r['warm_cpu']:.2f}" if r.get("warm_wall") is not None else "-"
        lines.append(
            f"| {r['size']:,} | {LABELS[r['sink']]} | {r['wall']:.2f} | {r['cpu']:.2f} | "
            f"{r['peak_rss'] / 2**20:.0f} | {r['bytes'] / 1e6:.2f} | {r['bytes'] / r['parquet_bytes']:.2f}x | "
            f"{wr} | {cr} | {warm} |")
    return lines


def targets(rows: list[dict]) -> list[str]:
    by = {(r["size"], r["sink"]): r for r in rows}
    sizes = sorted({r["size"] for r in rows})
    top, low = sizes[-1], sizes[0]
    out = ["| target | measured | met |", "|---|---:|---|"]

    def verdict(ok: bool) -> str:
        return "yes" if ok else "**no**"

    b_top, b_low, p_top = by.get((top, "bucket")), by.get((low, "bucket")), by.get((top, "parquet"))
    if b_top and b_low:
        for f, name in (("cpu", "CPU"), ("wall", "wall")):
            ratio = b_top[f] / b_low[f]
            out.append(f"| bucket upsert at {top:,} <= 1.5x its cost at {low:,} rows ({name}) "
                       f"| {ratio:.2f}x ({b_top[f]:.2f} / {b_low[f]:.2f} s) | {verdict(ratio <= 1.5)} |")
    if b_top and p_top:
        for f, name in (("cpu", "CPU"), ("wall", "wall")):
            ratio = b_top[f] / p_top[f]
            out.append(f"| bucket upsert at {top:,} <= 5x a Parquet append of the rows ({name}) "
                       f"| {ratio:.1f}x ({b_top[f]:.2f} / {p_top[f]:.2f} s) | {verdict(ratio <= 5)} |")
    bl = by.get((top, "bloom"))
    if bl:
        limit = BLOOM_CPU_BEFORE / 3
        out.append(f"| bloom upsert at {top:,}: CPU <= {limit:.2f} s (3x under {BLOOM_CPU_BEFORE} s), cold process "
                   f"| {bl['cpu']:.2f} s ({BLOOM_CPU_BEFORE / bl['cpu']:.1f}x under) | {verdict(bl['cpu'] <= limit)} |")
        if bl.get("warm_cpu") is not None:
            out.append(f"| the same, warm (next upsert of the process) | {bl['warm_cpu']:.2f} s "
                       f"({BLOOM_CPU_BEFORE / bl['warm_cpu']:.1f}x under) | {verdict(bl['warm_cpu'] <= limit)} |")
    for sink in ("bloom", "bucket"):
        r = by.get((top, sink))
        if r:
            ratio = r["bytes"] / r["parquet_bytes"]
            out.append(f"| {LABELS[sink]}: bytes written per upsert at {top:,} <= 1.5x the rows' Parquet "
                       f"| {ratio:.2f}x ({r['bytes'] / 1e6:.2f} / {r['parquet_bytes'] / 1e6:.2f} MB) "
                       f"| {verdict(ratio <= 1.5)} |")
    return out


def write_results(data: dict, reading: list[str]) -> None:
    from benchmarks.results import machine_line, write_section

    rows = summarise(data["samples"])
    a = data["args"]
    grow = ", ".join(f"{LABELS[k]} {v:.0f} s" for k, v in data["grow_s"].items())
    body = [
        f"Command: `{data['command']}`  ",
        f"{machine_line()} Local filesystem, local engine.  ",
        f"Load before (`uptime`): `{data['load_before']}`  ",
        f"Load after: `{data['load_after']}`",
        "",
        f"Tables grown by {a['grow']:,}-row batches of new keys (data shape of `bench_write`: 8 city partitions, "
        f"key `id`); at each size one upsert of {a['upsert']:,} rows (30% updates of random existing keys, "
        f"70% inserts; the same rows for every sink), {a['repeat']} repetitions, each on a fresh copy of the "
        "grown table (`cp -r`, not timed) in a fresh child process; medians. CPU: the child's process CPU "
        "seconds (all threads) during the upsert, opening the table included; peak RSS: the child's VmHWM "
        "(imports and the generated rows included); bytes written: our commit's write stats, the new data "
        "files for delta-rs and Parquet; beside them the same rows as one snappy Parquet file. Warm: a "
        "second upsert of the same shape right after, in the same process (its footer cache warm). "
        f"Bucket index: {a['buckets']} buckets per partition ({8 * a['buckets']} file groups; "
        f"{max(a['sizes']) // (8 * a['buckets']):,} rows per bucket at {max(a['sizes']):,}), grown by inserts "
        "into the buckets and fully compacted at each recorded size; bloom: grown by bulk inserts (a base "
        f"file of {a['grow'] // 8:,} rows per partition per batch). Growing the tables (not measured): {grow}.",
        "",
        *tables(rows),
        "",
        *targets(rows),
        "",
        *reading,
    ]
    write_section(HEADING, body)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0,1000000,3000000,10000000")
    ap.add_argument("--sinks", default=",".join(SINKS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--upsert", type=int, default=100_000)
    ap.add_argument("--grow", type=int, default=1_000_000, help="rows per growth batch")
    ap.add_argument("--buckets", type=int, default=2, help="bucket index: buckets per partition")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--work", help="folder for the grown tables (default: a temporary one, removed)")
    ap.add_argument("--save", help="write the run's raw samples here (JSON)")
    ap.add_argument("--render", help="rewrite the RESULTS.md section from a saved run, measuring nothing")
    ap.add_argument("--reading", help="a text file whose paragraphs follow the tables in RESULTS.md")
    ap.add_argument("--profile", action="store_true", help="cProfile our upserts at the largest size")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        c = json.loads(args.child)
        if c[0] == "grow":
            print(json.dumps(child_grow(c[1], c[2], c[3], c[4], c[5], c[6])), flush=True)
        else:
            print(json.dumps(child_upsert(*c[1:])), flush=True)
        # the result is out: skip interpreter teardown, where pyarrow's dataset writer
        # threads once aborted a Parquet-append child ("terminate called without an
        # active exception", exit -6) after its measurement had finished
        sys.stderr.flush()
        os._exit(0)
    reading = Path(args.reading).read_text().rstrip("\n").split("\n") if args.reading else []
    if args.render:
        data = json.loads(Path(args.render).read_text())
        write_results(data, reading)
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    sinks = [s for s in args.sinks.split(",") if s]
    unknown = set(sinks) - set(SINKS)
    if unknown:
        ap.error(f"unknown sinks {sorted(unknown)}")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench_growth_"))
    work.mkdir(parents=True, exist_ok=True)
    before, t0 = uptime(), time.perf_counter()
    print(before, flush=True)
    try:
        result = run(sizes, sinks, args.repeat, args.upsert, args.grow, args.buckets, args.seed, work,
                     args.profile, log=lambda m: print(m, flush=True))
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    after = uptime()
    print(after, flush=True)
    data = {"command": " ".join([".venv/bin/python -m benchmarks.bench_growth", *argv]),
            "load_before": before, "load_after": after, "run_s": time.perf_counter() - t0,
            "args": {"sizes": sizes, "repeat": args.repeat, "upsert": args.upsert, "grow": args.grow,
                     "buckets": args.buckets, "seed": args.seed}, **result}
    if args.save:
        Path(args.save).write_text(json.dumps(data, indent=1))
    rows = summarise(result["samples"])
    print("\n".join(tables(rows) + [""] + targets(rows)))
    if not args.no_write:
        write_results(data, reading)
    return 0


if __name__ == "__main__":
    sys.exit(main())

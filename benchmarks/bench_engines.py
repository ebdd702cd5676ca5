"""Spark engine vs local engine on one large upsert, and what the driver holds (issue 13).

Per engine and batch size N: a table loaded with N rows (untimed), then one upsert of N
rows (30% updates of existing keys, 70% inserts, 8 partitions: ``bench_write``'s data).
The local engine gets an Arrow table; the Spark engines get the same rows as a Spark
DataFrame read from Parquet by executors, repartitioned to Spark's default parallelism and
cached before timing (the input is then on executors, as a streaming batch is).

Engines: ``local``; ``local-df`` (the local engine handed the Spark engines' cached
DataFrame: it collects it as Arrow first, as it does with every streaming micro-batch -
the comparison issue 14 asks for); ``spark`` (the local engine's steps per table partition on executors,
the driver receives write stats); ``spark-collect`` (the earliest path: keys collected to
the driver, looked up there).

Measured per upsert commit: wall; CPU seconds of this (driver) process; CPU of the Spark
JVM and every process under it (Python workers), from ``/proc`` (``utime+stime`` plus
reaped children), in local mode executors included; the driver process's peak RSS above
its RSS before the commit and the JVM's peak RSS (sampled every 20 ms; in local mode the
JVM hosts the executors too); and the keys / summary rows the driver collected
(``CommitResult.engine_stats``). Every (engine, size) runs ``--repeats`` times on a copy
of the same loaded table, after an untimed warm-up upsert per Spark engine (the JIT);
the section reports medians. Measures, never asserts.

    .venv/bin/python -m benchmarks.bench_engines [--sizes 1000000,3000000] [--engines local,spark] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from benchmarks.bench_write import make_batch, uptime
from benchmarks.results import machine_line, write_section
from streamer.write import HudiWriter, TableConfig, WriteOptions

HEADING = "## Engines: Spark vs local upsert, driver bound (issue 13)"
ENGINES = ("local", "local-df", "spark", "spark-collect")
_TICK = os.sysconf("SC_CLK_TCK")


def _rss(pid: int | str = "self") -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class PeakRss:
    """A process's peak RSS while the block runs (a sampling thread: ru_maxrss cannot be reset)."""

    def __init__(self, pid: int | str = "self") -> None:
        self.pid = pid

    def __enter__(self) -> PeakRss:
        self.before = self.peak = _rss(self.pid)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._sample, daemon=True)
        self._t.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, _rss(self.pid))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss(self.pid))


def _tree_cpu(root: int) -> dict[int, float]:
    """CPU seconds per process of ``root``'s tree (each with its reaped children)."""
    parent: dict[int, int] = {}
    times: dict[int, float] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        parent[int(d)] = int(fields[1])
        times[int(d)] = sum(int(x) for x in fields[11:15]) / _TICK
    keep, todo = set(), [root]
    while todo:
        p = todo.pop()
        keep.add(p)
        todo.extend(c for c, pp in parent.items() if pp == p and c not in keep)
    return {p: times[p] for p in keep if p in times}


def _cpu_since(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU the tree spent between two readings: a process that exited meanwhile (an idle
    Python worker Spark stopped) is left out rather than counted negative."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def _jvm_pid() -> int | None:
    from pyspark import SparkContext

    gw = getattr(SparkContext, "_gateway", None)
    proc = getattr(gw, "proc", None)
    return getattr(proc, "pid", None)


def _writer(path: str, engine: str) -> HudiWriter:
    opts = WriteOptions(engine="local", parallelism=os.cpu_count() or 2)
    return HudiWriter.create(path, TableConfig("bench", ("id",), ("city",), "ts"), options=opts)


def _upsert(w: HudiWriter, data, engine: str):
    if engine == "spark-collect":
        # the earlier path, for comparison: keys collected and looked up on the driver
        from streamer.write.engine import spark as spark_engine

        orig = spark_engine.SparkEngine.__init__

        def collecting(self, buckets=None, tag_on_executors=True):
            orig(self, buckets, tag_on_executors=False)

        spark_engine.SparkEngine.__init__ = collecting
        try:
            return w.upsert(data, engine="spark")
        finally:
            spark_engine.SparkEngine.__init__ = orig
    if engine == "local-df":
        return w.upsert(data, engine="local")
    return w.upsert(data, engine=engine)


def load_table(root: Path, size: int, seed: int = 42):
    """A table loaded with ``size`` rows (local engine) and the upsert batch for it."""
    rng = np.random.default_rng(seed)
    load, next_id = make_batch(rng, size, 0, 0, 1)
    batch, _ = make_batch(rng, size, next_id, next_id, 2)
    path = root / f"loaded-{size}"
    _writer(str(path), "local").upsert(load, engine="local")
    pq.write_table(batch, root / f"batch-{size}.parquet")  # the Spark engines' input, read by executors
    return path, batch


def run_one(root: Path, engine: str, size: int, spark, loaded: tuple[Path, object] | None = None,
            quiet: bool = False, rep: int = 0) -> dict:
    src, batch = loaded or load_table(root, size)
    path = str(root / f"{engine}-{size}-{rep}")
    shutil.copytree(src, path)  # the same loaded table for every engine and repetition
    w = HudiWriter.open(path, options=WriteOptions(engine="local", parallelism=os.cpu_count() or 2))
    data: object = batch
    if engine != "local":
        # on executors, cached, in as many partitions as Spark has cores by default (a Kafka
        # batch comes in one per topic partition); never through the driver's heap
        # (createDataFrame of a 3M-row Arrow table ships it in 40 MB tasks: the JVM ran out)
        data = spark.read.parquet(str(src.parent / f"batch-{size}.parquet"))
        data = data.repartition(spark.sparkContext.defaultParallelism).persist()
        data.count()
    jvm = _jvm_pid() if spark is not None else None
    jvm_cpu0 = _tree_cpu(jvm) if jvm else None
    cpu0, t0 = time.process_time(), time.perf_counter()
    with PeakRss() as rss, PeakRss(jvm or "self") as jrss:
        res = _upsert(w, data, engine)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    jvm_cpu = _cpu_since(jvm_cpu0, _tree_cpu(jvm)) if jvm else None
    if engine != "local":
        data.unpersist(blocking=True)
    st = res.engine_stats
    row = {"engine": engine, "size": size, "wall": wall, "cpu": cpu, "jvm_cpu": jvm_cpu,
           "rss_delta": rss.peak - rss.before, "jvm_rss": jrss.peak if jvm else None,
           "driver_keys": st.driver_keys, "summary_rows": st.driver_summary_rows}
    shutil.rmtree(path, ignore_errors=True)
    if quiet:
        return row
    jc = "n/a" if jvm_cpu is None else f"{jvm_cpu:.1f}s"
    jr = "n/a" if row["jvm_rss"] is None else f"{row['jvm_rss'] / 2**20:,.0f} MiB"
    print(f"{engine:>13} {size:>9,}  wall {wall:6.1f}s  driver cpu {cpu:6.1f}s  jvm+workers cpu {jc}  "
          f"driver peak rss +{row['rss_delta'] / 2**20:,.0f} MiB  jvm peak rss {jr}  "
          f"keys on driver {st.driver_keys:,}  summary rows {st.driver_summary_rows}  load {_load1()}", flush=True)
    return row


def _load1() -> str:
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


_LINE = re.compile(
    r"^\s*(?P<engine>[\w-]+) +(?P<size>[\d,]+)  wall +(?P<wall>[\d.]+)s  driver cpu +(?P<cpu>[\d.]+)s  "
    r"jvm\+workers cpu (?P<jvm>[\d.]+s|n/a)  driver peak rss \+(?P<rss>[\d,-]+) MiB  "
    r"jvm peak rss (?P<jrss>[\d,]+ MiB|n/a)  "
    r"keys on driver (?P<keys>[\d,]+)  summary rows (?P<summary>\d+)  load (?P<load>[\d.]+)$")


def rows_from_log(text: str) -> list[dict]:
    """The rows a run printed (``--from-log``: write the section of a run made with ``--no-write``)."""
    out = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            jvm, jrss = m["jvm"], m["jrss"]
            out.append({"engine": m["engine"], "size": int(m["size"].replace(",", "")), "wall": float(m["wall"]),
                        "cpu": float(m["cpu"]), "jvm_cpu": None if jvm == "n/a" else float(jvm[:-1]),
                        "rss_delta": int(m["rss"].replace(",", "")) * 2**20,
                        "jvm_rss": None if jrss == "n/a" else int(jrss[:-4].replace(",", "")) * 2**20,
                        "driver_keys": int(m["keys"].replace(",", "")), "summary_rows": int(m["summary"])})
    return out


def write_results(rows: list[dict], command: str, load_before: str, load_after: str) -> None:
    write_section(HEADING, results_body(rows, command, load_before, load_after))


def _median(rows: list[dict], key: str) -> float | None:
    vals = [r[key] for r in rows if r[key] is not None]
    return float(np.median(vals)) if vals else None


def results_body(rows: list[dict], command: str, load_before: str, load_after: str) -> list[str]:
    body = [
        machine_line(),
        "",
        f"Command: `{command}`",
        "",
        f"Load before: `{load_before}`; after: `{load_after}` (2 shared cores: other sessions were "
        "running; read the ratios and CPU seconds, not the wall seconds).",
        "",
        "Per size N: a table loaded with N rows, then one upsert of N rows (30% updates, 70% "
        "inserts, 8 partitions), repeated on copies of the loaded table; medians of the runs. "
        "`spark` runs the local engine's steps per table partition on executors (one shuffle; "
        "the driver receives write stats); `spark-collect` is the earliest path (keys collected "
        "to the driver); `local` gets an Arrow table, `local-df` the Spark engines' cached DataFrame "
        "(collected as Arrow first, as every micro-batch is). CPU: driver = this Python process; JVM+workers = the local-mode Spark "
        "JVM and its Python workers (`/proc`). Driver RSS: the Python driver's peak above its "
        "RSS before the commit; JVM RSS: the JVM's peak (driver and, in local mode, executors).",
        "",
        "| engine | N | runs | wall s | driver CPU s | JVM+workers CPU s | total CPU s "
        "| driver peak RSS +MiB | JVM peak RSS MiB | keys on driver | summary rows | speed vs local (wall) "
        "| CPU vs local | speed vs local-df (wall) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    groups: dict[tuple[str, int], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["engine"], r["size"]), []).append(r)
    med = {k: {m: _median(v, m) for m in ("wall", "cpu", "jvm_cpu", "rss_delta", "jvm_rss")}
           for k, v in groups.items()}
    for (engine, size), runs in groups.items():
        m = med[(engine, size)]
        total = m["cpu"] + (m["jvm_cpu"] or 0.0)
        local = med.get(("local", size))
        speed = f"{local['wall'] / m['wall']:.2f}x" if local else "n/a"
        cpu_ratio = f"{total / (local['cpu'] + (local['jvm_cpu'] or 0.0)):.1f}x" if local else "n/a"
        local_df = med.get(("local-df", size))
        speed_df = f"{local_df['wall'] / m['wall']:.2f}x" if local_df else "n/a"
        jc = "n/a" if m["jvm_cpu"] is None else f"{m['jvm_cpu']:.1f}"
        jr = "n/a" if m["jvm_rss"] is None else f"{m['jvm_rss'] / 2**20:,.0f}"
        body.append(f"| {engine} | {size:,} | {len(runs)} | {m['wall']:.1f} | {m['cpu']:.1f} | {jc} | {total:.1f} | "
                    f"{m['rss_delta'] / 2**20:,.0f} | {jr} | {runs[0]['driver_keys']:,} | "
                    f"{runs[0]['summary_rows']} | {speed} | {cpu_ratio} | {speed_df} |")
    body += ["", "`speed vs local`: median local wall / median wall of this engine; `CPU vs local`: total CPU / "
             "the local engine's; `speed vs local-df`: the same against the local engine handed the same Spark "
             "DataFrame (issue 14 wants >= 0.8 for spark at 1M)."]
    return body


def command_of(log: str) -> str:
    for line in log.splitlines():
        if line.startswith("command: "):
            return line[len("command: "):]
    return ".venv/bin/python -m benchmarks.bench_engines"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,3000000")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    ap.add_argument("--from-log", nargs=3, metavar=("LOG", "LOAD_BEFORE", "LOAD_AFTER"),
                    help="write the section from a --no-write run's output and its two uptime lines")
    a = ap.parse_args(argv)
    if a.from_log:
        log, before, after = (Path(x).read_text().strip() for x in a.from_log)
        write_results(rows_from_log(log), command_of(log), before, after)
        return
    sizes = [int(s) for s in a.sizes.split(",")]
    engines = [e for e in a.engines.split(",") if e]
    spark = None
    if any(e != "local" for e in engines):
        from streamer.spark import get_spark

        spark = get_spark(app_name="bench-engines")
    load_before = uptime()
    print("command: .venv/bin/python -m benchmarks.bench_engines " + " ".join(sys.argv[1:] if argv is None else argv),
          flush=True)
    rows = []
    root = Path(tempfile.mkdtemp(prefix="bench-engines-"))
    try:
        warm = load_table(root, min(sizes))
        for engine in engines:  # untimed: JVM/JIT and Python workers warm for every engine
            if engine != "local":
                run_one(root, engine, min(sizes), spark, warm, quiet=True)
        shutil.rmtree(warm[0], ignore_errors=True)
        for size in sizes:
            loaded = load_table(root, size)
            for rep in range(a.repeats):
                for engine in engines:
                    rows.append(run_one(root, engine, size, spark, loaded, rep=rep))
            shutil.rmtree(loaded[0], ignore_errors=True)
            (root / f"batch-{size}.parquet").unlink(missing_ok=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    command = ".venv/bin/python -m benchmarks.bench_engines " + " ".join(sys.argv[1:] if argv is None else argv)
    if not a.no_write:
        write_results(rows, command.strip(), load_before, uptime())


if __name__ == "__main__":
    main()

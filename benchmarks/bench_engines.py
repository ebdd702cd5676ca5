"""Spark engine vs local engine on one large upsert, and what the driver holds (issue 13).

Per engine and batch size N: a table loaded with N rows (untimed), then one upsert of N
rows (30% updates of existing keys, 70% inserts, 8 partitions: ``bench_write``'s data).
The local engine gets an Arrow table; the Spark engines get a Spark DataFrame built from
it and cached before timing (the input is then on executors, as a streaming batch is).

Engines: ``local``; ``spark`` (tags rows on executors, the driver plans from counts);
``spark-collect`` (the earlier path: keys collected to the driver, looked up there).

Measured per upsert commit: wall; CPU seconds of this (driver) process; CPU of the Spark
JVM and every process under it (Python workers), from ``/proc`` (``utime+stime`` plus
reaped children), in local mode executors included; the driver process's peak RSS above
its RSS before the commit (sampled every 20 ms); and the keys / summary rows the driver
collected (``HudiWriter.last_engine_stats``). Measures, never asserts.

    .venv/bin/python -m benchmarks.bench_engines [--sizes 1000000,3000000] [--engines local,spark]
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

from benchmarks.bench_write import make_batch, uptime
from benchmarks.results import machine_line, write_section
from streamer.write import HudiWriter, TableConfig, WriteOptions

HEADING = "## Engines: Spark vs local upsert, driver bound (issue 13)"
ENGINES = ("local", "spark", "spark-collect")
_TICK = os.sysconf("SC_CLK_TCK")


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class PeakRss:
    """The process's peak RSS while the block runs (a sampling thread: ru_maxrss cannot be reset)."""

    def __enter__(self) -> PeakRss:
        self.before = self.peak = _rss()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._sample, daemon=True)
        self._t.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, _rss())


def _tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and all its live descendants (with their reaped children)."""
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
    return sum(times.get(p, 0.0) for p in keep)


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
        from streamer.engine import spark as spark_engine

        orig = spark_engine.SparkEngine.__init__

        def collecting(self, buckets=None, tag_on_executors=True):
            orig(self, buckets, tag_on_executors=False)

        spark_engine.SparkEngine.__init__ = collecting
        try:
            return w.upsert(data, engine="spark")
        finally:
            spark_engine.SparkEngine.__init__ = orig
    return w.upsert(data, engine=engine)


def run_one(root: Path, engine: str, size: int, spark, seed: int = 42, quiet: bool = False) -> dict:
    rng = np.random.default_rng(seed)
    load, next_id = make_batch(rng, size, 0, 0, 1)
    batch, _ = make_batch(rng, size, next_id, next_id, 2)
    path = str(root / f"{engine}-{size}")
    w = _writer(path, engine)
    w.upsert(load, engine="local")  # the same table for every engine, untimed
    data: object = batch
    if engine != "local":
        data = spark.createDataFrame(batch).persist()
        data.count()
    jvm = _jvm_pid() if spark is not None else None
    jvm_cpu0 = _tree_cpu(jvm) if jvm else None
    cpu0, t0 = time.process_time(), time.perf_counter()
    with PeakRss() as rss:
        _upsert(w, data, engine)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    jvm_cpu = _tree_cpu(jvm) - jvm_cpu0 if jvm else None
    if engine != "local":
        data.unpersist()
    st = w.last_engine_stats
    row = {"engine": engine, "size": size, "wall": wall, "cpu": cpu, "jvm_cpu": jvm_cpu,
           "rss_delta": rss.peak - rss.before, "driver_keys": st.driver_keys,
           "summary_rows": st.driver_summary_rows}
    shutil.rmtree(path, ignore_errors=True)
    if quiet:
        return row
    jc = "n/a" if jvm_cpu is None else f"{jvm_cpu:.1f}s"
    print(f"{engine:>13} {size:>9,}  wall {wall:6.1f}s  driver cpu {cpu:6.1f}s  jvm+workers cpu {jc}  "
          f"driver peak rss +{row['rss_delta'] / 2**20:,.0f} MiB  keys on driver {st.driver_keys:,}  "
          f"summary rows {st.driver_summary_rows}", flush=True)
    return row


_LINE = re.compile(
    r"^\s*(?P<engine>[\w-]+) +(?P<size>[\d,]+)  wall +(?P<wall>[\d.]+)s  driver cpu +(?P<cpu>[\d.]+)s  "
    r"jvm\+workers cpu (?P<jvm>[\d.]+s|n/a)  driver peak rss \+(?P<rss>[\d,-]+) MiB  "
    r"keys on driver (?P<keys>[\d,]+)  summary rows (?P<summary>\d+)$")


def rows_from_log(text: str) -> list[dict]:
    """The rows a run printed (``--from-log``: write the section of a run made with ``--no-write``)."""
    out = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            jvm = m["jvm"]
            out.append({"engine": m["engine"], "size": int(m["size"].replace(",", "")), "wall": float(m["wall"]),
                        "cpu": float(m["cpu"]), "jvm_cpu": None if jvm == "n/a" else float(jvm[:-1]),
                        "rss_delta": int(m["rss"].replace(",", "")) * 2**20,
                        "driver_keys": int(m["keys"].replace(",", "")), "summary_rows": int(m["summary"])})
    return out


def write_results(rows: list[dict], command: str, load_before: str, load_after: str) -> None:
    write_section(HEADING, results_body(rows, command, load_before, load_after))


def results_body(rows: list[dict], command: str, load_before: str, load_after: str) -> list[str]:
    body = [
        machine_line(),
        "",
        f"Command: `{command}`",
        "",
        f"Load before: `{load_before}`; after: `{load_after}` (2 shared cores: other sessions were "
        "running; one run, read the ratios, not the seconds).",
        "",
        "Per size N: a table loaded with N rows, then one upsert of N rows (30% updates, 70% "
        "inserts, 8 partitions). `spark` tags rows on executors and plans from counts; "
        "`spark-collect` is the earlier path (keys collected to the driver). CPU: driver = this "
        "Python process; JVM+workers = the local-mode Spark JVM and its Python workers (`/proc`). "
        "Driver RSS: peak above the RSS before the commit.",
        "",
        "| engine | N | wall s | driver CPU s | JVM+workers CPU s | driver peak RSS +MiB "
        "| keys on driver | summary rows | wall vs local |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    local = {r["size"]: r["wall"] for r in rows if r["engine"] == "local"}
    for r in rows:
        jc = "n/a" if r["jvm_cpu"] is None else f"{r['jvm_cpu']:.1f}"
        ratio = f"{local[r['size']] / r['wall']:.2f}x" if r["size"] in local else "n/a"
        body.append(f"| {r['engine']} | {r['size']:,} | {r['wall']:.1f} | {r['cpu']:.1f} | {jc} | "
                    f"{r['rss_delta'] / 2**20:,.0f} | {r['driver_keys']:,} | {r['summary_rows']} | {ratio} |")
    body += ["", "`wall vs local`: local wall / this wall (issue 14 wants >= 0.8 for spark at 1M)."]
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
        for engine in engines:  # untimed: JVM/JIT and Python workers warm for every engine
            if engine != "local":
                run_one(root, engine, 20_000, spark, quiet=True)
        for size in sizes:
            for engine in engines:
                rows.append(run_one(root, engine, size, spark))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    command = ".venv/bin/python -m benchmarks.bench_engines " + " ".join(sys.argv[1:] if argv is None else argv)
    if not a.no_write:
        write_results(rows, command.strip(), load_before, uptime())


if __name__ == "__main__":
    main()

"""Streamer: sustained throughput against the plain-Spark ceiling, available_now, freshness.

All run the real thing: a Kafka broker (``KAFKA_BOOTSTRAP_SERVERS``, else a local
KRaft broker started here), Spark Structured Streaming + ``foreachBatch`` and the MOR
writer, in one process with one SparkSession, on the **same topic**.

* **Ceiling**: the same Kafka source, ``from_json`` and ``df.write.parquet`` in
  ``foreachBatch`` (no keys, no merge, no exactly-once bookkeeping): what Spark alone
  does with these records on this machine. Run twice: with Kafka's default consumer
  ``fetch.max.wait.ms`` and with the one our source sets; the faster is the ceiling.
* **Throughput**: ``--records`` JSON upserts (30% updates) are produced first, then the
  continuous pipeline ingests them with ``--batch`` records per micro-batch, once per
  engine in ``--engines``; records/s "sustained" excludes the first micro-batch (JIT
  warm-up) in every pipeline, ceiling included. Before each measured run the same
  pipeline runs once, unmeasured, over ``--warmup-records`` records of another topic into
  another folder: the JVM compiles Spark's planner, the Kafka client and the decode to
  machine code over tens of batches (its compiler threads used ~0.6 s of CPU per batch
  ten batches in), so without it the pipelines measured later ran on a warmer JVM than
  the first (the default-wait ceiling warmed the tuned one's identical query).
* **available_now**: the same backlog into a fresh table, ``trigger.mode: available_now``
  in batches of ``--batch``; the run returns by itself; a second run commits nothing.
* **Freshness**: while a background producer keeps ``--background-rps`` records/s
  flowing into another topic, ``--probes`` probe records are produced one at a time; the
  latency of each is from the broker's ack to the first snapshot read (our reader) that
  returns it, with a ``--trigger`` trigger and the default policies (services running).

CPU seconds (driver Python process and the JVM, from /proc) are reported beside wall
time: the machine's 2 cores are shared, so ratios between runs of one process are the
figures to compare. Measures, never asserts.

    .venv/bin/python -m benchmarks.bench_streamer [--records 300000] [--batch 100000] [--write-results]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from streamer.pipeline.report import PhaseTimes

HEADING = "## Streamer: freshness and throughput"
SCHEMA = "uuid STRING, ts BIGINT, city STRING, fare DOUBLE, _hoodie_is_deleted BOOLEAN"
CITIES = ("sf", "nyc", "ams", "chennai")


SERVICES_OFF = "{log_compaction: {mode: off}, compaction: {mode: off}, clean: {mode: off}, archive: {mode: off}}"


def pipeline(name: str, bootstrap: str, topic: str, lake: str, batch: int, trigger: str,
             engine: str = "auto", policies: str | None = SERVICES_OFF, mode: str = "continuous",
             read: str = "stream"):
    from streamer.config import parse_pipelines

    policy_line = f"\n    policies: {policies}" if policies else ""
    yaml = f"""
pipelines:
  - name: {name}
    source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic: {topic}, format: json,
              schema: "{SCHEMA}", max_records_per_batch: {batch}}}
    target: {{path: {lake}/{name}, record_key: [uuid], partition_by: [city], ordering_field: ts}}{policy_line}
    trigger: {{mode: {mode}, interval: {trigger}, read: {read}}}
    engine: {engine}
"""
    (config,), problems = parse_pipelines(yaml)
    if problems:
        raise SystemExit(f"bad benchmark pipeline: {problems}")
    return config


def records(rng: random.Random, n: int, start: int, key_space: int) -> list[bytes]:
    out = []
    for i in range(n):
        k = rng.randrange(key_space) if rng.random() < 0.3 and start + i > 0 else (start + i) % key_space
        out.append(json.dumps({"uuid": f"k{k:08d}", "ts": start + i, "city": CITIES[k % 4],
                               "fare": round(rng.uniform(3, 90), 2), "_hoodie_is_deleted": False}).encode())
    return out


def run_until(runner, stop_when, timeout_s: float) -> None:
    stop = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            runner.run_continuous(stop, timeout_s=timeout_s)
        except BaseException as e:
            failure.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and t.is_alive() and not stop_when():
        time.sleep(0.2)
    stop.set()
    t.join(timeout=150)
    if failure:
        raise failure[0]


class CpuClock:
    """CPU seconds of this Python process and of the Spark JVM (user + system, /proc)."""

    def __init__(self, spark) -> None:
        self.jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        self.tick = os.sysconf("SC_CLK_TCK")

    def _jvm(self) -> float:
        try:
            with open(f"/proc/{self.jvm_pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / self.tick
        except OSError:
            return float("nan")

    def now(self) -> tuple[float, float]:
        return time.process_time(), self._jvm()

    def since(self, start: tuple[float, float]) -> tuple[float, float]:
        py, jvm = self.now()
        return py - start[0], jvm - start[1]


def produce_backlog(kafka, n: int, name: str = "bench-throughput") -> tuple[str, float]:
    topic = kafka.create_topic(name, partitions=3)
    rng = random.Random(1)
    t0 = time.monotonic()
    for start in range(0, n, 20_000):
        kafka.produce(topic, records(rng, min(20_000, n - start), start, key_space=n))
    return topic, time.monotonic() - t0


def _rates(stamps: list[tuple[float, int]], started: float) -> tuple[float, float, float]:
    """(total seconds, records/s overall, records/s sustained: first batch excluded)."""
    total_s = stamps[-1][0] - started
    n = sum(r for _, r in stamps)
    steady = sum(r for _, r in stamps[1:]) / (stamps[-1][0] - stamps[0][0]) if len(stamps) > 1 else float("nan")
    return total_s, n / total_s, steady


def ceiling(kafka, spark, cpu: CpuClock, topic: str, lake: str, batch: int, trigger: str,
            fetch_wait_ms: str | None = None) -> dict:
    """Plain Spark: same source and decoding, ``df.write.parquet`` in ``foreachBatch``.

    ``fetch_wait_ms``: the consumers' ``kafka.fetch.max.wait.ms`` (None: Kafka's default,
    as a plain job has it; our source sets :data:`~streamer.sources.kafka.settings.FETCH_MAX_WAIT_MS`,
    so the ceiling is run both ways and the faster one is the ceiling)."""
    from pyspark.sql import functions as F

    end = sum(kafka.end_offsets(topic).values())
    tag = "" if fetch_wait_ms is None else f"_wait{fetch_wait_ms}"
    out = os.path.join(lake, "ceiling" + tag)
    stamps: list[tuple[float, int]] = []
    batch_s: list[float] = []

    def write(df, batch_id: int) -> None:
        t0 = time.monotonic()
        df.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("j")).select("j.*") \
            .write.mode("append").parquet(out)
        done = time.monotonic()
        batch_s.append(done - t0)
        stamps.append((done, -1))  # row counts from the query's progress (no extra job)

    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(batch)))
    if fetch_wait_ms is not None:
        reader = reader.option("kafka.fetch.max.wait.ms", fetch_wait_ms)
    reader = reader.load()
    c0, started = cpu.now(), time.monotonic()
    query = (reader.writeStream.foreachBatch(write).option("checkpointLocation", os.path.join(lake, f"ceiling{tag}_ckpt"))
             .trigger(processingTime=pipeline("x", "h", "t", lake, batch, trigger).trigger.spark_processing_time())
             .start())
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        if rows >= end:
            break
        time.sleep(0.2)
    query.stop()
    py_s, jvm_s = cpu.since(c0)
    counts = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    stamps = [(t, n) for (t, _), n in zip(stamps, counts, strict=False)]
    total_s, rps, steady = _rates(stamps, started)
    name = "plain Spark (ceiling)" + ("" if fetch_wait_ms is None else f", kafka.fetch.max.wait.ms={fetch_wait_ms}")
    return {"pipeline": name, "records": sum(n for _, n in stamps), "batches": len(stamps),
            "total_s": total_s, "rps_total": rps, "rps_sustained": steady,
            "batch_s": statistics.median(batch_s[1:] or batch_s), "py_cpu_s": py_s, "jvm_cpu_s": jvm_s}


def throughput(kafka, spark, cpu: CpuClock, topic: str, lake: str, batch: int, trigger: str, spec: str) -> dict:
    """One continuous run; ``spec`` is ``ENGINE`` or ``ENGINE:poll`` (``trigger.read: poll``)."""
    from streamer.pipeline.runner import PipelineRunner

    engine, _, read = spec.partition(":")
    read = read or "stream"
    stamps: list[tuple[float, int]] = []
    config = pipeline(f"throughput_{engine}_{read}", kafka.bootstrap_servers, topic, lake, batch, trigger, engine,
                      read=read)
    runner = PipelineRunner(config, spark=spark,
                            on_report=lambda r: stamps.append((time.monotonic(), r.read)) if not r.skipped else None)
    end = sum(kafka.end_offsets(topic).values())
    c0, started = cpu.now(), time.monotonic()
    run_until(runner, lambda: sum(r for _, r in stamps) >= end, timeout_s=900)
    py_s, jvm_s = cpu.since(c0)
    total_s, rps, steady = _rates(stamps, started)
    done = [r for r in runner.reports if not r.skipped]
    return {"pipeline": f"mor-streamer, {engine} engine, read: {read}", "records": sum(r for _, r in stamps),
            "batches": len(stamps), "total_s": total_s, "rps_total": rps, "rps_sustained": steady,
            "batch_s": statistics.median([r.latency_s for r in done[1:] or done]),
            "phases": {name: statistics.median([getattr(r.phases, name) for r in done[1:] or done])
                       for name in PhaseTimes.NAMES},
            "py_cpu_s": py_s, "jvm_cpu_s": jvm_s}


def available_now(kafka, spark, cpu: CpuClock, topic: str, lake: str, batch: int) -> dict:
    """The backlog into a fresh table with ``trigger.mode: available_now``, then once more."""
    from streamer.pipeline.multi import run_pipelines

    config = pipeline("available_now", kafka.bootstrap_servers, topic, lake, batch, "1s", "local",
                      policies=None, mode="available_now")
    first: list = []
    c0, started = cpu.now(), time.monotonic()
    run_pipelines([config], once=False, spark=spark, on_report=first.append)
    wall = time.monotonic() - started
    py_s, jvm_s = cpu.since(c0)
    second: list = []
    run_pipelines([config], once=False, spark=spark, on_report=second.append)
    return {"records": sum(r.written for r in first), "batches": len(first),
            "commits": sum(1 for r in first if r.instant), "wall_s": wall, "py_cpu_s": py_s, "jvm_cpu_s": jvm_s,
            "second_run": [r.status for r in second],
            "services": sorted({f"{s.action} {s.outcome}" for r in first for s in r.services})}


def freshness(kafka, spark, lake: str, topic: str, probes: int, background_rps: int, trigger: str,
              read: str) -> dict:
    import pyarrow.compute as pc

    from streamer.pipeline.runner import PipelineRunner
    from streamer.read import Table

    config = pipeline(f"freshness_{read}", kafka.bootstrap_servers, topic, lake, 50_000, trigger, policies=None,
                      read=read)
    runner = PipelineRunner(config, spark=spark)
    stop_bg = threading.Event()
    sent = [0]

    def background() -> None:
        rng = random.Random(2)
        while not stop_bg.is_set():
            sent[0] += kafka.produce(topic, records(rng, background_rps // 2, 10_000_000 + sent[0], 50_000))
            stop_bg.wait(0.5)

    latencies: list[float] = []

    def probe_all() -> bool:
        hoodie = os.path.join(config.target.path, ".hoodie")
        for i in range(probes):
            key = f"probe-{i:04d}"
            payload = json.dumps({"uuid": key, "ts": 1, "city": "sf", "fare": 1.0, "_hoodie_is_deleted": False})
            kafka.produce(topic, [payload], keys=[key])
            acked = time.monotonic()
            seen_commits = -1
            while time.monotonic() - acked < 60:
                commits = len([n for n in os.listdir(hoodie) if n.endswith(".deltacommit")]) if os.path.isdir(hoodie) else 0
                if commits != seen_commits:
                    seen_commits = commits
                    t = Table.open(config.target.path).read(columns=["uuid"], filter=pc.field("uuid") == key)
                    if t.num_rows:
                        latencies.append(time.monotonic() - acked)
                        break
                time.sleep(0.05)
            time.sleep(random.Random(i).uniform(0.2, 1.0))  # probes land at random points of the trigger
        return True

    bg = threading.Thread(target=background, daemon=True)
    bg.start()
    warm = threading.Event()
    try:
        # Warm-up: wait for the first commit before probing (JVM/JIT start is not freshness).
        def first_commit_then_probe() -> bool:
            if not warm.is_set():
                if any(not r.skipped for r in runner.reports):
                    warm.set()
                return False
            return probe_all()

        run_until(runner, first_commit_then_probe, timeout_s=probes * 60 + 300)
    finally:
        stop_bg.set()
        bg.join(timeout=30)
    lat = sorted(latencies)
    pick = (lambda q: lat[min(len(lat) - 1, int(round(q * (len(lat) - 1))))]) if lat else (lambda q: float("nan"))
    done = [r for r in runner.reports if not r.skipped]
    phases = {name: round(statistics.median(getattr(r.phases, name) for r in done), 3) if done else None
              for name in PhaseTimes.NAMES}
    phases["batch"] = round(statistics.median(r.latency_s for r in done), 3) if done else None
    return {"probes": probes, "seen": len(lat), "p50": pick(0.5), "p95": pick(0.95), "max": lat[-1] if lat else None,
            "background_rps": background_rps, "background_sent": sent[0], "batches": len(done),
            "median_phases_s": phases}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--batch", type=int, default=100_000, help="max_records_per_batch of the throughput runs")
    ap.add_argument("--engines", default="local,local:poll,spark",
                    help="throughput runs, comma-separated: ENGINE (Structured Streaming) or ENGINE:poll "
                    "(trigger.read: poll)")
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--background-rps", type=int, default=1_000)
    ap.add_argument("--trigger", default="1s", help="trigger interval of the freshness runs")
    ap.add_argument("--throughput-trigger", default="100ms",
                    help="trigger interval of the ceiling and throughput runs: short, so that batches run back to "
                         "back (at 1s, 100k-record batches cap every pipeline at 100k records/s)")
    ap.add_argument("--freshness-reads", default="stream,poll", help="trigger.read of the freshness runs")
    ap.add_argument("--warmup-records", type=int, default=300_000,
                    help="records of an unmeasured run of each pipeline before its measured one (0: none)")
    ap.add_argument("--skip", default="", help="parts to skip: ceiling,throughput,available_now,freshness")
    ap.add_argument("--write-results", action="store_true", help="replace our section of benchmarks/RESULTS.md")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))

    from streamer.local.kafka import KafkaClient, LocalKafkaBroker
    from streamer.spark import get_spark

    runs: list[dict] = []
    avail = None
    fresh: list[tuple[str, dict]] = []
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="bench-streamer-") as tmp:
        if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
            kafka = KafkaClient(os.environ["KAFKA_BOOTSTRAP_SERVERS"])
        else:
            kafka = stack.enter_context(LocalKafkaBroker())
        spark = get_spark(app_name="bench-streamer")
        cpu = CpuClock(spark)
        lake = str(Path(tmp) / "lake")
        topic, produce_s = produce_backlog(kafka, args.records)
        # created early: a topic's leaders must be settled before a pipeline asks for watermarks
        fresh_topics = {read: kafka.create_topic(f"bench-freshness-{read}", partitions=3)
                        for read in filter(None, args.freshness_reads.split(","))}
        print(f"produced {args.records:,} records in {produce_s:.1f}s", flush=True)
        warm_topic = None
        if args.warmup_records and not {"ceiling", "throughput"} <= skip:
            warm_topic, _ = produce_backlog(kafka, args.warmup_records, name="bench-warmup")
        warmups = iter(range(1_000))

        def warm_up(run, *rest) -> None:
            """One unmeasured run of the same pipeline over the warm-up topic, its own folder."""
            if warm_topic is not None:
                r = run(kafka, spark, cpu, warm_topic, f"{lake}/warmup-{next(warmups)}", *rest)
                print(f"warm-up ({r['pipeline']}): {r['rps_sustained']:,.0f} rec/s", flush=True)

        if "ceiling" not in skip:
            from streamer.sources.kafka.settings import FETCH_MAX_WAIT_MS

            for wait in (None, FETCH_MAX_WAIT_MS):
                warm_up(ceiling, args.batch, args.throughput_trigger, wait)
                runs.append(ceiling(kafka, spark, cpu, topic, lake, args.batch, args.throughput_trigger, wait))
                print("throughput:", json.dumps(runs[-1]), flush=True)
        if "throughput" not in skip:
            for engine in filter(None, args.engines.split(",")):
                warm_up(throughput, args.batch, args.throughput_trigger, engine)
                runs.append(throughput(kafka, spark, cpu, topic, lake, args.batch, args.throughput_trigger, engine))
                print("throughput:", json.dumps(runs[-1]), flush=True)
        if "available_now" not in skip:
            avail = available_now(kafka, spark, cpu, topic, lake, args.batch)
            print("available_now:", json.dumps(avail), flush=True)
        if "freshness" not in skip:
            for read, fresh_topic in fresh_topics.items():
                fresh.append((read, freshness(kafka, spark, lake, fresh_topic, args.probes, args.background_rps,
                                              args.trigger, read)))
                print(f"freshness ({read}):", json.dumps(fresh[-1][1]), flush=True)
        spark.stop()
    if args.write_results:
        write_results(args, runs, avail, fresh)
    return 0


def write_results(args, runs: list[dict], avail: dict | None, fresh: list[tuple[str, dict]]) -> None:
    from benchmarks.results import machine_line, write_section

    cmd = " ".join(["python", "-m", "benchmarks.bench_streamer", *sys.argv[1:]])
    load = os.getloadavg()
    # the faster of the plain jobs (Kafka's default consumer wait, and ours) is the ceiling
    ceiling_rps = max((r["rps_sustained"] for r in runs if r["pipeline"].startswith("plain")), default=None)
    body = [
        f"Command: `.venv/bin/{cmd}`  ",
        f"{machine_line()} Local KRaft broker, 3-partition topic, {args.records:,} JSON records (30% updates) "
        f"produced before the runs, micro-batches of <= {args.batch:,} (trigger interval {args.throughput_trigger}), local filesystem, SparkSession `local[*]`, "
        "one process and one run"
        + (f", each measured run after an unmeasured run of the same pipeline over {args.warmup_records:,} records "
           "of another topic (JVM warm-up)" if args.warmup_records else "")
        + ". Throughput runs: table services off. Load average (1/5/15 min) at the end: "
        f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}: the 2 cores are shared with other jobs, so compare the ratios "
        "and CPU seconds of one run, not absolute rates across runs.",
        "",
        "| pipeline | sustained rec/s | vs ceiling | median batch (s) | of which read / prepare / commit (s) "
        "| wall (s) | driver CPU (s) | JVM CPU (s) |",
        "|---|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in runs:
        ratio = f"{r['rps_sustained'] / ceiling_rps:.2f}x" if ceiling_rps else "-"
        phases = r.get("phases")
        split = " / ".join(f"{phases[p]:.2f}" for p in ("read", "prepare", "commit")) if phases else "-"
        body.append(f"| {r['pipeline']} | {r['rps_sustained']:,.0f} | {ratio} | {r['batch_s']:.2f} | {split} | "
                    f"{r['total_s']:.1f} | {r['py_cpu_s']:.1f} | {r['jvm_cpu_s']:.1f} |")
    if avail is not None:
        body += ["", f"`trigger.mode: available_now` over the same backlog into a fresh table (local engine, default "
                 f"policies, inline): {avail['records']:,} records in {avail['batches']} batches "
                 f"({avail['commits']} commits), returned by itself after {avail['wall_s']:.1f}s wall "
                 f"({avail['py_cpu_s']:.1f}s driver CPU, {avail['jvm_cpu_s']:.1f}s JVM CPU); services: "
                 f"{', '.join(avail['services']) or 'none due'}. A second run: {', '.join(avail['second_run'])} "
                 "(no commit)."]
    if fresh:
        body += ["", f"| freshness (trigger {args.trigger}, default policies) | probes seen / sent | p50 (s) | "
                 "p95 (s) | max (s) |", "|---|---:|---:|---:|---:|"]
        body += [f"| read: {read} | {fr['seen']} / {fr['probes']} | {fr['p50']:.2f} | {fr['p95']:.2f} | "
                 f"{fr['max']:.2f} |" for read, fr in fresh]
        body += [
            "",
            "Freshness is broker ack -> first snapshot read (our reader) returning the probe, with "
            f"~{args.background_rps:,} records/s of background upserts on the same topic, compaction and log "
            "compaction in the pipeline's background service thread (the continuous default).",
        ]
    write_section(HEADING, body)


if __name__ == "__main__":
    sys.exit(main())

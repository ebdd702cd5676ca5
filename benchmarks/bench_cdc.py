"""Change data capture: freshness from a Postgres commit to a Hudi snapshot, and a backlog.

The real parts, on loopback, as the tests start them: a PostgreSQL server, a Kafka
Connect worker with Debezium's Postgres connector, the KRaft broker, and the pipeline
(``source.debezium: postgres``) in this process with one SparkSession.

* **Freshness**: a load thread commits ``--rate`` changes/s to Postgres (a transaction of
  updates every 100 ms, over ``--rows`` rows), while ``--probes`` probe updates, one a
  second, each set a new value on a probe row. A probe's latency runs from the moment its
  ``COMMIT`` returned to the first snapshot read (our reader, polled every 50 ms) that
  returns the value: Debezium's capture, Kafka, the pipeline's trigger (``--trigger``),
  its write and commit. p50 and p95 over the probes; CPU seconds of this process and its
  Spark JVM beside the wall time.
* **Backlog**: ``--backlog`` changes are committed to Postgres first (updates of every row
  of a table, in transactions of 10,000), Debezium publishes them, and then (a) the
  pipeline ingests the topic with ``trigger: available_now`` into a fresh table, and (b)
  a plain Spark job reads the same topic with ``spark.read.format("kafka")``, parses the
  JSON and appends Parquet (no keys, no merge, no ordering, no exactly-once): the
  ceiling on the same records in the same process.

Measures, never asserts.

    .venv/bin/python -m benchmarks.bench_cdc [--rate 1000] [--probes 30] [--backlog 1000000]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.bench_streamer import CpuClock

HEADING = "## CDC: Postgres to a Hudi snapshot, freshness and a backlog"

PIPELINE = """
pipelines:
  - name: {name}
    source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic: {topic}, debezium: postgres{extra}}}
    target: {{path: "{lake}", record_key: [id]}}
    trigger: {trigger}
    engine: {engine}
    spark: {{master: "local[2]", conf: {{spark.sql.shuffle.partitions: "2", spark.default.parallelism: "2"}}}}
"""


def _config(**kw: str):
    from streamer.config import parse_pipelines

    (config,), problems = parse_pipelines(PIPELINE.format(**{"extra": "", "engine": "local", **kw}))
    assert not problems, problems
    return config


def _capture(postgres, connect, kafka, db: str, table_ddl: str, fill: str) -> str:
    """A database with one table, captured by a Debezium connector: its topic."""
    from tests.support.connect import postgres_connector

    postgres.sql(f"CREATE DATABASE {db}")
    postgres.sql(table_ddl + ";" + fill, database=db)
    connect.create(db, postgres_connector(port=postgres.port, database=db, prefix=db, tables="public.t",
                                          slot=f"slot_{db}"))
    connect.wait_running(db)
    return f"{db}.public.t"


def _wait_events(kafka, topic: str, count: int, timeout_s: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        try:
            if sum(kafka.end_offsets(topic).values()) >= count:
                return time.monotonic() - t0
        except Exception:  # the topic appears with the first event
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{topic}: fewer than {count} events after {timeout_s:.0f}s")


def freshness(postgres, connect, kafka, spark, cpu: CpuClock, tmp: Path, rate: int, rows: int, probes: int,
              trigger: str) -> dict:
    import pyarrow.compute as pc

    from streamer.pipeline.runner import PipelineRunner
    from streamer.read import Table

    db = "fresh"
    topic = _capture(postgres, connect, kafka, db, "CREATE TABLE t (id int PRIMARY KEY, v bigint)",
                     f"INSERT INTO t SELECT g, 0 FROM generate_series(0, {rows}) g")
    _wait_events(kafka, topic, rows + 1, 300)
    config = _config(name="fresh", bootstrap=kafka.bootstrap_servers, topic=topic, lake=str(tmp / "fresh"),
                     trigger=f"{{mode: continuous, interval: {trigger}}}")
    runner = PipelineRunner(config, spark=spark)
    runner.run_once()  # the snapshot, before the clock starts
    stop = threading.Event()
    failure: list[BaseException] = []
    per_tick = max(1, rate // 10)
    sent = [0]

    def load() -> None:
        rng = random.Random(7)
        try:
            while not stop.is_set():
                t0 = time.monotonic()
                ids = ",".join(str(rng.randint(1, rows)) for _ in range(per_tick))
                postgres.sql(f"UPDATE t SET v = v + 1 WHERE id IN ({ids})", database=db)
                sent[0] += per_tick
                stop.wait(max(0.0, 0.1 - (time.monotonic() - t0)))
        except BaseException as e:  # noqa: BLE001
            failure.append(e)

    def run() -> None:
        try:
            runner.run_continuous(stop, timeout_s=600)
        except BaseException as e:  # noqa: BLE001
            failure.append(e)

    threads = [threading.Thread(target=load, daemon=True), threading.Thread(target=run, daemon=True)]
    for t in threads:
        t.start()
    time.sleep(5)  # the load and the pipeline in their stride
    c0, w0, sent0 = cpu.now(), time.monotonic(), sent[0]
    latencies = []
    table = Table.open(config.target.path)
    for probe in range(1, probes + 1):
        value = 1_000_000_000 + probe
        postgres.sql(f"UPDATE t SET v = {value} WHERE id = 0", database=db)
        committed = time.monotonic()
        deadline = committed + 60
        while time.monotonic() < deadline and not failure:
            table.refresh()
            hit = table.read(columns=["v"], filter=pc.field("id") == 0).column("v").to_pylist()
            if hit and hit[0] == value:
                latencies.append(time.monotonic() - committed)
                break
            time.sleep(0.05)
        else:
            raise TimeoutError(f"probe {probe} not visible after 60 s")
        time.sleep(max(0.0, 1.0 - (time.monotonic() - committed)))
    py_s, jvm_s = cpu.since(c0)
    wall = time.monotonic() - w0
    achieved = (sent[0] - sent0) / wall
    stop.set()
    for t in threads:
        t.join(60)
    if failure:
        raise failure[0]
    latencies.sort()
    return {"rate_target": rate, "rate_achieved": achieved, "probes": len(latencies),
            "p50_s": statistics.median(latencies), "p95_s": latencies[max(0, int(round(0.95 * len(latencies))) - 1)],
            "max_s": latencies[-1], "wall_s": wall, "py_cpu_s": py_s, "jvm_cpu_s": jvm_s}


def backlog(postgres, connect, kafka, spark, cpu: CpuClock, tmp: Path, changes: int) -> list[dict]:
    from pyspark.sql import functions as F

    from streamer.pipeline.runner import PipelineRunner

    db = "backlog"
    rows = min(changes, 100_000)
    topic = _capture(postgres, connect, kafka, db, "CREATE TABLE t (id int PRIMARY KEY, v bigint, name text)",
                     f"INSERT INTO t SELECT g, 0, 'row ' || g FROM generate_series(1, {rows}) g")
    done = rows
    t0 = time.monotonic()
    while done < changes:
        step = min(10_000, changes - done)
        lo = (done % rows) + 1
        postgres.sql(f"UPDATE t SET v = v + 1 WHERE id BETWEEN {lo} AND {lo + step - 1}", database=db)
        done += step
    published_s = _wait_events(kafka, topic, changes, 3600)
    print(f"backlog: {changes} changes committed and published in {time.monotonic() - t0:.0f}s "
          f"(waited {published_s:.0f}s for Debezium)", file=sys.stderr)
    out = []
    config = _config(name="backlog", bootstrap=kafka.bootstrap_servers, topic=topic, lake=str(tmp / "backlog"),
                     trigger="{mode: available_now}", extra=", max_records_per_batch: 250000", engine="auto")
    c0, w0 = cpu.now(), time.monotonic()
    reports = PipelineRunner(config, spark=spark).run_available_now()
    py_s, jvm_s = cpu.since(c0)
    out.append({"run": "ours, available_now (Debezium rows, upserts by key)", "records": sum(r.read for r in reports),
                "batches": len(reports), "wall_s": time.monotonic() - w0, "py_cpu_s": py_s, "jvm_cpu_s": jvm_s})
    c0, w0 = cpu.now(), time.monotonic()
    raw = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
           .option("subscribe", topic).option("startingOffsets", "earliest").load())
    parsed = raw.where(F.col("value").isNotNull()).select(
        F.from_json(F.col("value").cast("string"), "after STRUCT<id: INT, v: BIGINT, name: STRING>, op STRING, "
                    "source STRUCT<lsn: BIGINT>").alias("e")).select("e.after.*", "e.op", "e.source.lsn")
    parsed.write.mode("overwrite").parquet(str(tmp / "plain"))
    py_s, jvm_s = cpu.since(c0)
    n = spark.read.parquet(str(tmp / "plain")).count()
    out.append({"run": "plain Spark: Kafka -> from_json -> Parquet append", "records": n, "batches": 1,
                "wall_s": time.monotonic() - w0, "py_cpu_s": py_s, "jvm_cpu_s": jvm_s})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=1_000, help="changes/s committed to Postgres during the probes")
    ap.add_argument("--rows", type=int, default=50_000, help="rows the load updates")
    ap.add_argument("--probes", type=int, default=30)
    ap.add_argument("--trigger", default="1s", help="the pipeline's trigger interval")
    ap.add_argument("--backlog", type=int, default=1_000_000, help="changes of the backlog run (0: skip)")
    args = ap.parse_args(argv)

    from streamer.local.kafka import LocalKafkaBroker
    from streamer.spark import get_spark
    from tests.support.connect import LocalConnect
    from tests.support.postgres import LocalPostgres

    with tempfile.TemporaryDirectory(prefix="bench-cdc-") as tmp, LocalKafkaBroker() as kafka, \
            LocalPostgres() as postgres, LocalConnect(bootstrap_servers=kafka.bootstrap_servers) as connect:
        spark = get_spark(app_name="bench-cdc", conf={"spark.driver.memory": "2g"})
        cpu = CpuClock(spark)
        load0 = os.getloadavg()
        fresh = freshness(postgres, connect, kafka, spark, cpu, Path(tmp), args.rate, args.rows, args.probes,
                          args.trigger)
        print(f"freshness at {fresh['rate_achieved']:.0f} changes/s (target {args.rate}): p50 {fresh['p50_s']:.2f}s, "
              f"p95 {fresh['p95_s']:.2f}s, max {fresh['max_s']:.2f}s over {fresh['probes']} probes; "
              f"{fresh['wall_s']:.0f}s wall, CPU {fresh['py_cpu_s']:.1f}s Python + {fresh['jvm_cpu_s']:.1f}s JVM")
        if args.backlog:
            for r in backlog(postgres, connect, kafka, spark, cpu, Path(tmp), args.backlog):
                print(f"{r['run']}: {r['records']} records in {r['batches']} batch(es), {r['wall_s']:.1f}s wall "
                      f"({r['records'] / r['wall_s']:.0f}/s), CPU {r['py_cpu_s']:.1f}s Python + {r['jvm_cpu_s']:.1f}s JVM")
        print(f"load average before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; after: "
              + " ".join(f"{x:.2f}" for x in os.getloadavg()))
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

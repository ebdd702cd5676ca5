"""Streamer: end-to-end freshness and sustained throughput of the Kafka JSON pipeline.

Both run the real thing: a Kafka broker (``KAFKA_BOOTSTRAP_SERVERS``, else a local
KRaft broker started here), the continuous pipeline (Structured Streaming +
``foreachBatch``) and the MOR writer, in one process with one SparkSession.

* **Throughput**: ``--records`` JSON upserts (30% updates) are produced first, then the
  pipeline ingests them with ``--batch`` records per micro-batch; records/s over the
  whole run and "sustained" (first micro-batch, which pays JIT warm-up, excluded).
* **Freshness**: while a background producer keeps ``--background-rps`` records/s
  flowing into another topic, ``--probes`` probe records are produced one at a time; the
  latency of each is from the broker's ack to the first snapshot read (our reader) that
  returns it, with a ``--trigger`` trigger. p50/p95/max are reported.

Measures, never asserts.

    .venv/bin/python -m benchmarks.bench_streamer [--records 200000] [--probes 20] [--write-results]
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

HEADING = "## Streamer: freshness and throughput"
SCHEMA = "uuid STRING, ts BIGINT, city STRING, fare DOUBLE, _hoodie_is_deleted BOOLEAN"
CITIES = ("sf", "nyc", "ams", "chennai")


def pipeline(name: str, bootstrap: str, topic: str, lake: str, batch: int, trigger: str):
    from streamer.config import parse_pipelines

    yaml = f"""
pipelines:
  - name: {name}
    source: {{type: kafka, bootstrap_servers: "{bootstrap}", topic: {topic}, format: json,
              schema: "{SCHEMA}", max_records_per_batch: {batch}}}
    target: {{path: {lake}/{name}, record_key: [uuid], partition_by: [city], ordering_field: ts}}
    policies: {{log_compaction: {{mode: off}}, compaction: {{mode: off}}, clean: {{mode: off}}, archive: {{mode: off}}}}
    trigger: {{mode: continuous, interval: {trigger}}}
    engine: auto
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


def throughput(kafka, spark, lake: str, n: int, batch: int, trigger: str) -> dict:
    from streamer.pipeline.runner import PipelineRunner

    topic = kafka.create_topic("bench-throughput", partitions=3)
    rng = random.Random(1)
    t0 = time.monotonic()
    for start in range(0, n, 20_000):
        kafka.produce(topic, records(rng, min(20_000, n - start), start, key_space=n))
    produce_s = time.monotonic() - t0
    stamps: list[tuple[float, int]] = []
    runner = PipelineRunner(pipeline("throughput", kafka.bootstrap_servers, topic, lake, batch, trigger), spark=spark,
                            on_report=lambda r: stamps.append((time.monotonic(), r.read)) if not r.skipped else None)
    end = sum(kafka.end_offsets(topic).values())
    started = time.monotonic()
    run_until(runner, lambda: sum(r for _, r in stamps) >= end, timeout_s=900)
    total_s = stamps[-1][0] - started
    steady = sum(r for _, r in stamps[1:]) / (stamps[-1][0] - stamps[0][0]) if len(stamps) > 1 else float("nan")
    return {"records": sum(r for _, r in stamps), "batches": len(stamps), "produce_s": produce_s,
            "total_s": total_s, "rps_total": sum(r for _, r in stamps) / total_s, "rps_sustained": steady,
            "batch_s": statistics.median([r.latency_s for r in runner.reports if not r.skipped])}


def freshness(kafka, spark, lake: str, probes: int, background_rps: int, trigger: str) -> dict:
    import pyarrow.compute as pc

    from streamer.pipeline.runner import PipelineRunner
    from streamer.read import Table

    topic = kafka.create_topic("bench-freshness", partitions=3)
    config = pipeline("freshness", kafka.bootstrap_servers, topic, lake, 50_000, trigger)
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
    return {"probes": probes, "seen": len(lat), "p50": pick(0.5), "p95": pick(0.95), "max": lat[-1] if lat else None,
            "background_rps": background_rps, "background_sent": sent[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=50_000, help="max_records_per_batch of the throughput run")
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--background-rps", type=int, default=1_000)
    ap.add_argument("--trigger", default="1s")
    ap.add_argument("--write-results", action="store_true", help="replace our section of benchmarks/RESULTS.md")
    args = ap.parse_args(argv)

    from streamer.spark import get_spark
    from streamer.testing.kafka import KafkaClient, LocalKafkaBroker

    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="bench-streamer-") as tmp:
        if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
            kafka = KafkaClient(os.environ["KAFKA_BOOTSTRAP_SERVERS"])
        else:
            kafka = stack.enter_context(LocalKafkaBroker())
        spark = get_spark(app_name="bench-streamer")
        lake = str(Path(tmp) / "lake")
        tp = throughput(kafka, spark, lake, args.records, args.batch, args.trigger)
        print("throughput:", json.dumps(tp), flush=True)
        fr = freshness(kafka, spark, lake, args.probes, args.background_rps, args.trigger)
        print("freshness:", json.dumps(fr), flush=True)
        spark.stop()
    if args.write_results:
        write_results(args, tp, fr)
    return 0


def write_results(args, tp: dict, fr: dict) -> None:
    from benchmarks.results import machine_line, write_section

    cmd = " ".join(["python", "-m", "benchmarks.bench_streamer", *sys.argv[1:]])
    load = os.getloadavg()[0]
    write_section(HEADING, [
        f"Command: `.venv/bin/{cmd}`  ",
        f"{machine_line()} Local KRaft broker, 3-partition topics, JSON records, local filesystem, "
        f"SparkSession `local[*]`, engine `auto`, table services off. Load average at the end: {load:.1f} "
        "(the 2 cores are shared with other jobs: treat absolute numbers as noisy).",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| records ingested (throughput run) | {tp['records']:,} in {tp['batches']} micro-batches of <= {args.batch:,} |",
        f"| records/s, whole run (incl. first-batch warm-up) | {tp['rps_total']:,.0f} |",
        f"| records/s, sustained (first micro-batch excluded) | {tp['rps_sustained']:,.0f} |",
        f"| per micro-batch, transform + split + commit (decode excluded), median (s) | {tp['batch_s']:.2f} |",
        f"| freshness probes seen / sent | {fr['seen']} / {fr['probes']} |",
        f"| freshness p50 (s), trigger {args.trigger} | {fr['p50']:.2f} |",
        f"| freshness p95 (s) | {fr['p95']:.2f} |",
        f"| freshness max (s) | {fr['max']:.2f} |",
        "",
        "Freshness is broker ack -> first snapshot read (our reader) returning the probe, with "
        f"~{args.background_rps:,} records/s of background upserts on the same topic. It is bounded below by the "
        "trigger wait (up to one interval) plus one micro-batch: decode + offsets job, Arrow collect, "
        "the commit (bloom lookup, log blocks, completed instant).",
    ])


if __name__ == "__main__":
    sys.exit(main())

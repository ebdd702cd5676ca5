"""Streamer: one Kafka batch's decode and collect, ours against the plain Spark decode.

What the local engine's Spark job costs per micro-batch, without the write: the same
``--records`` JSON records (the throughput run's data) read from a local KRaft broker
in one batch, repeated ``--repeat`` times after one warm-up round, one process:

* **plain decode, toArrow**: ``from_json`` of the Kafka values collected as Arrow (the
  ceiling's decode, collected the way our local engine needs it);
* **plain decode, Parquet**: the same written with ``df.write.parquet`` (the ceiling);
* **ours, one pass**: :func:`streamer.pipeline.batch.prepare` on the source's batch
  (``Batch.together``: good and bad rows in one projection, no cache);
* **ours, cached two-branch**: the same batch without ``together``: the decode cached,
  then good and bad rows collected as one union (the path transforms take).

Ours include the source's side of a batch (offsets from the broker, the decode's plan)
and the split into rows and error rows; the plain ones are the bare Spark plan. CPU
seconds of the JVM and of this process come from /proc, beside wall time.

    .venv/bin/python -m benchmarks.bench_decode [--records 100000] [--repeat 4] [--write-results]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack

from benchmarks.bench_streamer import SCHEMA, CpuClock, pipeline, records

HEADING = "## Streamer: one Kafka batch's decode and collect"


def variants(spark, source, begin, end, config, out: str) -> dict[str, Callable[[], object]]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from streamer.pipeline.batch import prepare

    schema = StructType.fromDDL(SCHEMA)

    def plain():
        return source.read_raw(spark, begin, end).select(
            F.from_json(F.col("value").cast("string"), schema).alias("j")).select("j.*")

    def ours(one_pass: bool) -> Callable[[], object]:
        def run():
            batch = source.read_batch(spark, None)
            if not one_pass:
                batch = dataclasses.replace(batch, together=None)
            try:
                return prepare(config, spark, batch, "kafka", "{}").written
            finally:
                batch.release()
        return run

    return {
        "plain decode, toArrow": lambda: plain().toArrow(),
        "plain decode, Parquet": lambda: plain().write.mode("overwrite").parquet(out),
        "ours, one pass": ours(True),
        "ours, cached two-branch": ours(False),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=4)
    ap.add_argument("--write-results", action="store_true", help="replace our section of benchmarks/RESULTS.md")
    args = ap.parse_args(argv)

    from streamer.local.kafka import LocalKafkaBroker
    from streamer.sources import build_source
    from streamer.sources.position import KafkaOffsets
    from streamer.spark import get_spark

    rows: list[tuple[str, float, float, float]] = []
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        kafka = stack.enter_context(LocalKafkaBroker())
        spark = get_spark(app_name="bench-decode")
        cpu = CpuClock(spark)
        topic = kafka.create_topic("bench-decode", partitions=3)
        rng = random.Random(1)
        for start in range(0, args.records, 20_000):
            kafka.produce(topic, records(rng, min(20_000, args.records - start), start, args.records))
        config = pipeline("decode", kafka.bootstrap_servers, topic, tmp, args.records, "1s", "local", read="poll")
        source = build_source(config.source)
        end = KafkaOffsets(topic=topic, partitions=kafka.end_offsets(topic))
        begin = KafkaOffsets(topic=topic, partitions=dict.fromkeys(end.partitions, 0))
        runs = variants(spark, source, begin, end, config, os.path.join(tmp, "parquet"))
        for fn in runs.values():  # warm-up: class loading, code generation, Python workers
            fn()
        samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in runs}
        for _ in range(args.repeat):  # interleaved, so load drifts reach every variant alike
            for name, fn in runs.items():
                c0, t0 = cpu.now(), time.monotonic()
                fn()
                py_s, jvm_s = cpu.since(c0)
                samples[name].append((time.monotonic() - t0, jvm_s, py_s))
        spark.stop()
        for name, got in samples.items():
            rows.append((name, *(statistics.median(s[i] for s in got) for i in range(3))))
    for name, wall, jvm, py in rows:
        print(f"{name:28} wall {wall:.2f}s  JVM CPU {jvm:.2f}s  driver CPU {py:.2f}s", flush=True)
    if args.write_results:
        write_results(args, rows)
    return 0


def write_results(args, rows: list[tuple[str, float, float, float]]) -> None:
    from benchmarks.results import machine_line, write_section

    cmd = " ".join(["python", "-m", "benchmarks.bench_decode", *sys.argv[1:]])
    load = os.getloadavg()
    plain = rows[0][2]
    body = [
        f"Command: `.venv/bin/{cmd}`  ",
        f"{machine_line()} Local KRaft broker, 3-partition topic, one batch of {args.records:,} JSON records "
        f"(the throughput run's data), SparkSession `local[*]`; medians of {args.repeat} interleaved rounds after "
        f"a warm-up round. Load average (1/5/15 min) at the end: {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}.",
        "",
        "| path | wall (s) | JVM CPU (s) | vs plain decode (JVM CPU) | driver CPU (s) |",
        "|---|---:|---:|---:|---:|",
    ]
    body += [f"| {name} | {wall:.2f} | {jvm:.2f} | {jvm / plain:.2f}x | {py:.2f} |" for name, wall, jvm, py in rows]
    write_section(HEADING, body)


if __name__ == "__main__":
    sys.exit(main())

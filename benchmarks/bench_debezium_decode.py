"""Debezium JSON with embedded schemas: one batch decoded into table rows, typed by the
records' Connect schemas beside the value-inferred decode and a plain Spark ``from_json``.

``--records`` change events of a five-column table (an int key, text, an int, a 50-byte
note, a ``MicroTimestamp``), as Kafka Connect's JsonConverter writes them with
``schemas.enable``, stored once as the raw Kafka columns in Parquet and cached. Each
variant is run ``--repeat`` times after a warm-up, in one process and Spark session:

* **typed** (``source.connect_types: true``, the default): the batch's distinct schemas
  read with one aggregation, the decode by them, Debezium's named types converted;
* **inferred** (``connect_types: false``): Spark's JSON inference over every payload,
  then the decode by the inferred schema (what the source did before);
* **plain from_json** (the floor): ``from_json`` with the envelope's schema given, no
  schema read at all, the rows unpacked from ``after``.

Every variant collects its rows as Arrow (the local engine's path). Wall seconds and the
CPU seconds of this process and of the Spark JVM, medians. Measures, never asserts.

    .venv/bin/python -m benchmarks.bench_debezium_decode [--records 100000] [--repeat 3] [--write-results]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.bench_streamer import CpuClock
from benchmarks.bench_write import uptime
from benchmarks.results import machine_line, write_section

HEADING = "## CDC: decoding Debezium JSON with embedded schemas"
COLUMNS = [{"type": "int32", "optional": False, "field": "id"}, {"type": "string", "optional": True, "field": "name"},
           {"type": "int32", "optional": True, "field": "qty"}, {"type": "string", "optional": True, "field": "note"},
           {"type": "int64", "optional": True, "field": "seen", "name": "io.debezium.time.MicroTimestamp"}]


def raw_batch(n: int, path: Path) -> None:
    """``n`` events as the raw Kafka columns, in a Parquet file at ``path``."""
    from tests.support.cdc import connect_envelope, pg_event

    values = [json.dumps(connect_envelope(pg_event("u", None, {
        "id": i, "name": f"n{i}", "qty": i, "note": "x" * 50, "seen": 1_700_000_000_000_000 + i}, 100 + i),
        COLUMNS)).encode() for i in range(n)]
    pq.write_table(pa.table({
        "topic": ["t"] * n, "partition": pa.array([0] * n, pa.int32()), "offset": pa.array(range(n), pa.int64()),
        "timestamp": pa.array([dt.datetime(2024, 1, 1)] * n, pa.timestamp("us")), "value": pa.array(values, pa.binary()),
    }), path)


def variants(spark, raw) -> dict[str, Callable[[], int]]:
    from pyspark.sql import functions as F

    from streamer.config.sources import KafkaSourceConfig
    from streamer.sources.debezium import change_rows
    from streamer.sources.kafka.source import json_decoder

    def ours(typed: bool) -> Callable[[], int]:
        config = KafkaSourceConfig(type="kafka", bootstrap_servers="127.0.0.1:1", topic="t", debezium="postgres",
                                   connect_types=typed)

        def run() -> int:
            good, _, cached = json_decoder(spark, raw, config).frames()
            n = change_rows(good, "postgres").toArrow().num_rows
            for frame in cached:
                frame.unpersist()
            return n
        return run

    envelope = ("payload struct<after: struct<id: int, name: string, qty: int, note: string, seen: bigint>, "
                "op: string, source: struct<lsn: bigint>>")

    def plain() -> int:
        parsed = raw.select(F.from_json(F.col("value").cast("string"), envelope).alias("e"))
        return parsed.select("e.payload.after.*", "e.payload.op", "e.payload.source.lsn").toArrow().num_rows

    return {"typed (connect_types: true)": ours(True), "inferred (connect_types: false)": ours(False),
            "plain from_json, schema given": plain}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)
    from streamer.spark import get_spark

    before = uptime()
    spark = get_spark()
    clock = CpuClock(spark)
    with tempfile.TemporaryDirectory(prefix="bench-dbz-") as tmp:
        path = Path(tmp) / "raw.parquet"
        raw_batch(args.records, path)
        raw = spark.read.parquet(str(path)).cache()
        raw.count()
        runs = variants(spark, raw)
        samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in runs}
        for rep in range(args.repeat + 1):
            for name, fn in runs.items():
                start, t = clock.now(), time.perf_counter()
                rows = fn()
                py, jvm = clock.since(start)
                assert rows == args.records, (name, rows)
                if rep:  # the first round warms the JVM and Python workers
                    samples[name].append((time.perf_counter() - t, py, jvm))
    after = uptime()
    lines = [f"{args.records:,} Debezium change events with embedded schemas, one batch; medians of {args.repeat} "
             "after a warm-up round, one Spark session.", "",
             "| decode | wall (s) | driver CPU (s) | JVM CPU (s) |", "|---|---:|---:|---:|"]
    for name, got in samples.items():
        wall, py, jvm = (statistics.median(x[i] for x in got) for i in range(3))
        lines.append(f"| {name} | {wall:.2f} | {py:.2f} | {jvm:.2f} |")
    print("\n".join(lines))
    if args.write_results:
        given = sys.argv[1:] if argv is None else argv
        command = " ".join([".venv/bin/python -m benchmarks.bench_debezium_decode", *given])
        write_section(HEADING, [f"Command: `{command}`  ", f"{machine_line()}  ",
                                f"Load before (`uptime`): `{before}`  ", f"Load after: `{after}`", "", *lines, "",
                                "Reading: the typed decode reads the batch's schemas with one `get_json_object` "
                                "aggregation where inference parsed every payload for its types, and then decodes "
                                "by them; the plain `from_json` is given the schema and reads no schema at all. What ours pays beyond it "
                                "(not profiled this session): the schema aggregation, the error split with its "
                                "reasons, the cache, and unpacking `before` as well as `after`."])


if __name__ == "__main__":
    main()

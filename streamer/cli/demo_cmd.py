"""``streamer demo``: the embedded demo, runnable on a bare laptop (no server needed).

Until the pipeline runner lands this is a placeholder pipeline: a seeded generator
feeds Spark, a SQL transform derives a column, and the batch is written under the
lake folder, then read back and shown. It exercises the same set-up a real run
needs (virtualenv, JVM jars, local Spark with the pinned Python workers).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the embedded demo pipeline (local Spark, local lake)")
    p.add_argument("--lake", default="lake", help="lake folder (default: ./lake)")
    p.add_argument("--records", type=int, default=5000, help="records to generate")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from streamer.spark import get_spark

    lake = Path(args.lake).resolve()
    target = lake / "demo_placeholder"
    print(f"mor-streamer demo (placeholder pipeline): {args.records} generated trips -> {target}")
    t0 = time.monotonic()
    spark = get_spark(app_name="mor-streamer-demo")
    src = spark.range(args.records).selectExpr(
        "uuid() AS uuid",
        "element_at(array('sf','nyc','ams'), CAST(id % 3 + 1 AS INT)) AS city",
        "CAST(1700000000000 + id * 1000 AS BIGINT) AS ts",
        "ROUND(5 + (id * 7919 % 1000) / 10.0, 2) AS fare",
    )
    src.createOrReplaceTempView("demo_input")
    out = spark.sql("SELECT *, to_date(from_unixtime(ts / 1000)) AS day FROM demo_input")
    out.write.mode("overwrite").partitionBy("city").parquet(str(target))
    back = spark.read.parquet(str(target))
    print(f"wrote {back.count()} records in {time.monotonic() - t0:.1f}s; per city:")
    for row in back.groupBy("city").count().orderBy("city").collect():
        print(f"  {row['city']}: {row['count']}")
    print("sample:")
    for row in back.orderBy("ts").limit(3).collect():
        print("  " + ", ".join(f"{k}={v}" for k, v in row.asDict().items()))
    return 0

"""A long-lived Apache Hudi (JVM) Spark session that answers requests on stdin.

Run by :mod:`streamer.testing.hudi` with the *Hudi* virtualenv's interpreter
(``.venv-hudi``: pyspark 3.5.x) and one Hudi Spark bundle on ``spark.jars``. It imports
nothing from this project on purpose: the project runs on PySpark 4.x, Hudi's bundles
on Spark 3.5, and the two never share an interpreter or a JVM.

Protocol: one JSON object per line in, one JSON object per line out (``{"ok": ...}`` or
``{"error": "...", "trace": "..."}``). Results that are tables travel as Arrow IPC files
in a folder the caller names, so values keep their types (decimals, timestamps,
binary, nested) and the caller compares Arrow to Arrow.

Ops:
- ``read``: a Hudi query (``snapshot``, ``read_optimized``, ``incremental``,
  ``time_travel``) with extra options; writes the rows to ``out``.
- ``write``: a Hudi datasource write of the rows in a Parquet file (``rows``), with
  the given ``hoodie.*`` options and save mode.
- ``sql``: a Spark SQL statement (Hudi procedures such as ``CALL run_compaction``);
  rows written to ``out`` when given.
- ``batch``: a list of the above, answered as a list (one round trip).
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def _session(jar: str):
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(os.environ.get("HUDI_WORKER_MASTER", "local[2]"))
        .appName("hudi-oracle")
        .config("spark.jars", jar)
        # Hudi's quickstart settings (Kryo, the Hudi session extension and catalog).
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        .config("spark.sql.extensions", "org.apache.spark.sql.hudi.HoodieSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.hudi.catalog.HoodieCatalog"
        )
        .config("spark.kryo.registrator", "org.apache.spark.HoodieSparkKryoRegistrar")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("HUDI_WORKER_MEMORY", "2g"))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.warehouse.dir", os.path.join(os.environ.get("TMPDIR", "/tmp"), "hudi-wh"))
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _write_arrow(df, out: str) -> int:
    import pyarrow as pa

    table = df._collect_as_arrow()  # list of record batches (pyspark 3.5)
    schema = None
    if table:
        schema = table[0].schema
        result = pa.Table.from_batches(table, schema=schema)
    else:
        from pyspark.sql.pandas.types import to_arrow_schema

        result = pa.Table.from_batches([], schema=to_arrow_schema(df.schema))
    with pa.OSFile(out, "wb") as sink, pa.ipc.new_file(sink, result.schema) as writer:
        writer.write_table(result)
    return result.num_rows


_QUERY_OPTIONS = {
    "snapshot": {"hoodie.datasource.query.type": "snapshot"},
    "read_optimized": {"hoodie.datasource.query.type": "read_optimized"},
    "incremental": {"hoodie.datasource.query.type": "incremental"},
    "time_travel": {"hoodie.datasource.query.type": "snapshot"},
}


def _read(spark, req: dict) -> dict:
    query = req.get("query", "snapshot")
    options = dict(_QUERY_OPTIONS[query])
    if query == "incremental":
        options["hoodie.datasource.read.begin.instanttime"] = req["begin"]
        if req.get("end"):
            options["hoodie.datasource.read.end.instanttime"] = req["end"]
    if query == "time_travel":
        options["as.of.instant"] = req["as_of"]
    options.update(req.get("options") or {})
    df = spark.read.format("hudi").options(**options).load(req["path"])
    if req.get("columns"):
        df = df.select(*req["columns"])
    return {"rows": _write_arrow(df, req["out"])}


def _write(spark, req: dict) -> dict:
    df = spark.read.parquet(req["rows"])
    if req.get("columns_sql"):
        df = df.selectExpr(*req["columns_sql"])
    (
        df.write.format("hudi")
        .options(**req["options"])
        .mode(req.get("mode", "append"))
        .save(req["path"])
    )
    return {"written": True}


def _sql(spark, req: dict) -> dict:
    df = spark.sql(req["sql"])
    if req.get("out"):
        return {"rows": _write_arrow(df, req["out"])}
    df.collect()
    return {}


def _handle(spark, req: dict) -> dict:
    op = req.get("op")
    if op == "batch":
        return {"results": [_answer(spark, r) for r in req["requests"]]}
    if op == "read":
        return _read(spark, req)
    if op == "write":
        return _write(spark, req)
    if op == "sql":
        return _sql(spark, req)
    if op == "version":
        return {"spark": spark.version, "jar": os.path.basename(os.environ["HUDI_WORKER_JAR"])}
    raise ValueError(f"unknown op {op!r}")


def _answer(spark, req: dict) -> dict:
    try:
        return {"ok": _handle(spark, req)}
    except Exception as e:  # noqa: BLE001 - every failure goes back to the caller
        text = str(e)
        first = text.splitlines()[0] if text else type(e).__name__
        return {"error": (_java_causes(e) or first)[:3000],
                "detail": text[:20000], "trace": traceback.format_exc()[-8000:]}


def _java_causes(e: Exception) -> str | None:
    """The JVM exception and its causes, one line each (py4j's own text says little)."""
    jex = getattr(e, "java_exception", None)
    causes = []
    while jex is not None and len(causes) < 6:
        causes.append(str(jex.toString()))
        jex = jex.getCause()
    return " <- caused by ".join(causes) or None


def main() -> int:
    jar = os.environ["HUDI_WORKER_JAR"]
    # The protocol owns the real stdout; the JVM (started below, inheriting fd 1) and
    # Python's print go to stderr instead.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        spark = _session(jar)
    except Exception as e:  # noqa: BLE001
        out.write(json.dumps({"error": f"Spark with {jar} did not start: {e}"}) + "\n")
        out.flush()
        return 1
    out.write(json.dumps({"ready": spark.version}) + "\n")
    out.flush()
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        if req.get("op") == "stop":
            break
        out.write(json.dumps(_answer(spark, req)) + "\n")
        out.flush()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

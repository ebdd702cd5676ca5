"""A long-lived Apache Hudi (JVM) Spark session that answers requests on stdin.

Run by :mod:`tests.support.hudi` with the *Hudi* virtualenv's interpreter
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
  the given ``hoodie.*`` options and save mode; answers the save's wall ``seconds``,
  the JVM's and this interpreter's CPU seconds and the Spark ``jobs`` it ran.
- ``sql``: a Spark SQL statement (Hudi procedures such as ``CALL run_compaction``);
  rows written to ``out`` when given.
- ``table_config``: what Hudi's own ``HoodieTableMetaClient``/``HoodieTableConfig``
  report for the table at ``path``: ``version``, ``ordering_fields``,
  ``record_key_fields``, ``partition_fields`` and ``keygen_class``.
- ``batch``: a list of the above, answered as a list (one round trip).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pyspark 3.5 in the Hudi virtualenv; py4j's objects are untyped
    from py4j.java_gateway import JavaObject
    from pyspark.sql import DataFrame, SparkSession

#: A request or an answer: a JSON object.
Json = dict[str, Any]


#: The resources every ``new Configuration()`` of Hadoop reads, in the order Hadoop
#: registers them once HDFS, MapReduce and YARN classes are loaded (what Hudi's readers load).
_HADOOP_RESOURCES = ("core-default.xml", "core-site.xml", "mapred-default.xml", "mapred-site.xml",
                     "yarn-default.xml", "yarn-site.xml", "hdfs-default.xml", "hdfs-rbf-default.xml",
                     "hdfs-site.xml", "hdfs-rbf-site.xml")


def _settings_only(xml: bytes) -> bytes:
    """A Hadoop ``*-default.xml`` without its descriptions and comments: the same
    properties (name, value, ``final``), a third of the bytes to parse."""
    import re

    text = re.sub(rb"<!--.*?-->", b"", xml, flags=re.S)
    text = re.sub(rb"<description>.*?</description>", b"", text, flags=re.S)
    return re.sub(rb"\n\s*\n+", b"\n", text)


def _hadoop_resources() -> str:
    """A folder, first on the driver's class path, holding every resource in
    :data:`_HADOOP_RESOURCES`: the ones pyspark's Hadoop jar has, copied unchanged, and
    an empty ``<configuration/>`` for the ones no jar has (Hadoop skips a missing one).

    Why: Parquet's reader builder makes a ``new Configuration()`` for every Parquet file
    and log block Hudi reads, and each one looks up these ten resources through the class
    loader - seven of them in vain, through all of Spark's 250 jars and the Hudi bundle.
    Found in the first class-path entry, the lookups cost nothing; the settings are the
    same. (A fifth of the oracle's CPU, by JFR.)"""
    import glob
    import zipfile

    import pyspark

    (jar,) = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "hadoop-client-api-*.jar"))
    folder = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"hudi-oracle-{os.path.basename(jar)[:-4]}")
    if os.path.isfile(os.path.join(folder, _HADOOP_RESOURCES[-1])):
        return folder
    staging = f"{folder}.{os.getpid()}"
    os.makedirs(staging, exist_ok=True)
    with zipfile.ZipFile(jar) as z:
        present = set(z.namelist())
        for name in _HADOOP_RESOURCES:
            data = _settings_only(z.read(name)) if name in present else b"<?xml version=\"1.0\"?>\n<configuration/>\n"
            with open(os.path.join(staging, name), "wb") as f:
                f.write(data)
    try:
        os.rename(staging, folder)
    except OSError:  # another oracle made it first
        import shutil

        shutil.rmtree(staging, ignore_errors=True)
    return folder


def _session(jar: str) -> SparkSession:
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
        # The client compiler only, and the serial collector: the oracle runs many small
        # jobs, where C2's compile threads and G1's cost more CPU than they win back (the
        # encodings and format-audit tiers: 217 -> 159 CPU-s on 2 cores).
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.driver.extraClassPath", _hadoop_resources())
    )
    # extra settings from the parent (HudiSpark.conf), e.g. a Hive-enabled catalog
    for key, value in json.loads(os.environ.get("HUDI_WORKER_CONF") or "{}").items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _write_arrow(df: DataFrame, out: str) -> int:
    import pyarrow as pa

    # list of record batches; pyspark 3.5's DataFrame (this worker's) has the method, mypy
    # reads pyspark 4's, where it moved to the classic DataFrame
    table = df._collect_as_arrow()  # type: ignore[operator]
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


def _read(spark: SparkSession, req: Json) -> Json:
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


def _jvm_pid(spark: SparkSession) -> int | None:
    """The driver JVM's pid (pyspark 3.5 started it as the py4j gateway's child)."""
    proc = getattr(spark.sparkContext._gateway, "proc", None)
    return getattr(proc, "pid", None)


def _cpu_s(pid: int | None) -> float | None:
    """utime + stime of process ``pid`` (all its threads), in seconds; None if unreadable."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # fields from the 3rd (state) on
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _jobs_since(spark: SparkSession, first_job: int) -> list[Json]:
    """Spark jobs with id >= ``first_job``: Hudi's description and wall seconds (timing only)."""
    try:
        jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)  # newest first
        out: list[Json] = []
        for i in range(jobs.size()):
            job = jobs.apply(i)
            if job.jobId() < first_job:
                break
            if job.submissionTime().isEmpty():
                continue
            end, desc = job.completionTime(), job.description()
            start_ms = job.submissionTime().get().getTime()
            out.append({
                "id": job.jobId(),
                "description": (desc.get() if desc.isDefined() else job.name())[:200],
                "seconds": ((end.get().getTime() - start_ms) / 1000) if end.isDefined() else None,
            })
        return sorted(out, key=lambda j: j["id"])
    except Exception:  # noqa: BLE001 - timing detail only, never fails a write
        return []


def _next_job_id(spark: SparkSession) -> int:
    try:
        jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)  # newest first
        return jobs.apply(0).jobId() + 1 if jobs.size() else 0
    except Exception:  # noqa: BLE001 - timing detail only
        return 0


def _write(spark: SparkSession, req: Json) -> Json:
    df = spark.read.parquet(req["rows"])
    if req.get("columns_sql"):
        df = df.selectExpr(*req["columns_sql"])
    # Timing of the save alone (not the staging of the rows, not the round trip): wall,
    # the driver JVM's CPU (all its threads; local mode runs the executors in it) and
    # this interpreter's own CPU.
    jvm = _jvm_pid(spark)
    first_job = _next_job_id(spark)
    jvm0, py0, t0 = _cpu_s(jvm), time.process_time(), time.perf_counter()
    (
        df.write.format("hudi")
        .options(**req["options"])
        .mode(req.get("mode", "append"))
        .save(req["path"])
    )
    seconds, py1, jvm1 = time.perf_counter() - t0, time.process_time(), _cpu_s(jvm)
    return {
        "written": True,
        "seconds": seconds,
        "jvm_cpu_s": (jvm1 - jvm0) if jvm0 is not None and jvm1 is not None else None,
        "py_cpu_s": py1 - py0,
        "jobs": _jobs_since(spark, first_job),
    }


def _sql(spark: SparkSession, req: Json) -> Json:
    df = spark.sql(req["sql"])
    if req.get("out"):
        return {"rows": _write_arrow(df, req["out"])}
    df.collect()
    return {}


def _java_list(option: JavaObject) -> list[str] | None:
    """A Hudi ``Option<String[]>`` as a list (``None`` when empty)."""
    return [str(x) for x in option.get()] if option.isPresent() else None


def _ordering_fields(cfg: JavaObject) -> list[str]:
    """The ordering fields through whichever accessor this Hudi has: 1.2's
    ``getOrderingFields``, 1.1's ``getPreCombineFields``, or 0.15/1.0's
    ``getPreCombineField`` (one string, split on ',' as the writer does)."""
    from py4j.protocol import Py4JError

    for name in ("getOrderingFields", "getPreCombineFields"):
        try:
            return [str(x) for x in getattr(cfg, name)()]
        except Py4JError:
            continue
    value = cfg.getPreCombineField()
    return [f for f in str(value).split(",") if f] if value is not None else []


def _jvm(spark: SparkSession) -> JavaObject:
    jvm = spark._jvm
    if jvm is None:
        raise RuntimeError("the Spark session has no JVM (stopped?)")
    return jvm


def _meta_client(spark: SparkSession, path: str) -> JavaObject:
    """Hudi's ``HoodieTableMetaClient`` of the table at ``path``."""
    jvm = _jvm(spark)
    conf = jvm.org.apache.hudi.storage.hadoop.HadoopStorageConfiguration(spark._jsc.hadoopConfiguration())
    return jvm.org.apache.hudi.common.table.HoodieTableMetaClient.builder().setConf(conf) \
        .setBasePath(path).build()


def _table_config(spark: SparkSession, req: Json) -> Json:
    from py4j.protocol import Py4JError

    meta = _meta_client(spark, req["path"])
    cfg = meta.getTableConfig()
    try:
        keygen = cfg.getKeyGeneratorClassName()
    except Py4JError:
        keygen = None
    return {
        "version": int(cfg.getTableVersion().versionCode()),
        "ordering_fields": _ordering_fields(cfg),
        "record_key_fields": _java_list(cfg.getRecordKeyFields()),
        "partition_fields": _java_list(cfg.getPartitionFields()),
        "keygen_class": None if keygen is None else str(keygen),
    }


def _checkpoint(spark: SparkSession, req: Json) -> Json:
    """The checkpoint Hudi 1.x's own ``CheckpointUtils.getCheckpoint`` (what HoodieStreamer
    1.x resumes from) finds in the table's newest completed commit: its class (V1 or V2)
    and value."""
    jvm = _jvm(spark)
    meta = _meta_client(spark, req["path"])
    timeline = meta.getActiveTimeline().getCommitsTimeline().filterCompletedInstants()
    last = timeline.lastInstant().get()
    commit = jvm.org.apache.hudi.common.table.timeline.TimelineUtils.getCommitMetadata(last, timeline)
    found = jvm.org.apache.hudi.common.table.checkpoint.CheckpointUtils.getCheckpoint(commit)
    return {"instant": str(last.requestedTime()), "class": str(found.getClass().getSimpleName()),
            "value": str(found.getCheckpointKey())}


def _archived_timeline(spark: SparkSession, req: Json) -> Json:
    """Hudi 1.x: the instants its ``HoodieArchivedTimeline`` loads (with their details),
    and for each what deserialising its metadata gives: the commit's operation type, the
    clean's earliest retained commit, the rolled-back commits - or ``ERR ...``."""
    meta = _meta_client(spark, req["path"])
    archived = meta.getArchivedTimeline()
    archived.loadCompletedInstantDetailsInMemory()
    out = []
    for inst in archived.getInstants():
        action = str(inst.getAction())
        try:
            if action in ("commit", "deltacommit"):
                detail = str(archived.readCommitMetadata(inst).getOperationType())
            elif action == "clean":
                detail = str(archived.readCleanMetadata(inst).getEarliestCommitToRetain())
            elif action == "rollback":
                detail = str(list(archived.readRollbackMetadata(inst).getCommitsRollback()))
            else:
                detail = ""
        except Exception as e:  # noqa: BLE001 - reported to the test as data
            detail = f"ERR {e}"
        out.append({"requested": str(inst.requestedTime()), "completed": str(inst.getCompletionTime()),
                    "action": action, "detail": detail})
    return {"instants": out, "history": str(meta.getArchivePath())}


def _handle(spark: SparkSession, req: Json) -> Json:
    op = req.get("op")
    if op == "batch":
        return {"results": [_answer(spark, r) for r in req["requests"]]}
    if op == "read":
        return _read(spark, req)
    if op == "write":
        return _write(spark, req)
    if op == "sql":
        return _sql(spark, req)
    if op == "table_config":
        return _table_config(spark, req)
    if op == "checkpoint":
        return _checkpoint(spark, req)
    if op == "archived_timeline":
        return _archived_timeline(spark, req)
    if op == "version":
        return {"spark": spark.version, "jar": os.path.basename(os.environ["HUDI_WORKER_JAR"])}
    raise ValueError(f"unknown op {op!r}")


def _answer(spark: SparkSession, req: Json) -> Json:
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
    causes: list[str] = []
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

"""The one SparkSession factory everything uses.

Defaults suit a laptop (``local[*]``, no UI, quiet logs) and any cluster is a master
URL away. The Python workers are pinned to the running interpreter: a worker on
another Python would import another pyarrow/pyspark and fail in confusing ways.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from importlib import resources

from streamer.jvm import classpath

DEFAULT_MASTER = "local[*]"

_DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # Small local batches: a handful of shuffle partitions, not 200.
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}


def _log4j_config() -> str:
    return str(resources.files("streamer.resources").joinpath("log4j2.properties"))


def spark_conf(
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    with_kafka: bool = True,
) -> dict[str, str]:
    """The full configuration a session is built with (exposed for inspection/tests)."""
    out = dict(_DEFAULT_CONF)
    out["spark.master"] = master or os.environ.get("MOR_STREAMER_SPARK_MASTER", DEFAULT_MASTER)
    out["spark.pyspark.python"] = sys.executable
    out["spark.pyspark.driver.python"] = sys.executable
    log_opt = f"-Dlog4j2.configurationFile=file:{_log4j_config()}"
    out["spark.driver.extraJavaOptions"] = log_opt
    out["spark.executor.extraJavaOptions"] = log_opt
    if with_kafka:
        out["spark.jars"] = ",".join(classpath("spark"))
    out.update(conf or {})
    return out


def get_spark(
    master: str | None = None,
    app_name: str = "mor-streamer",
    conf: Mapping[str, str] | None = None,
    with_kafka: bool = True,
):
    """Return the active SparkSession, creating it with our defaults if needed.

    ``conf`` overrides any default. JVM-level settings (jars, driver options) only take
    effect for the first session of a process, as in Spark itself.
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name)
    for key, value in spark_conf(master, conf, with_kafka).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    # spark.read.format("morhudi") works in every session we build.
    from streamer.read.spark_source import register

    register(session)
    return session

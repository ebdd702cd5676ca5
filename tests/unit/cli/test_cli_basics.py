from __future__ import annotations

import sys

import pytest

from streamer.cli import build_parser, main
from streamer.spark import spark_conf


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "demo" in out
    assert "mor-streamer" in out


def test_no_command_prints_help(capsys):
    assert main([]) == 0
    assert "usage: streamer" in capsys.readouterr().out


def test_every_registered_command_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        assert p.format_help(), name


def test_spark_conf_pins_python_workers_and_connector_jars():
    conf = spark_conf()
    assert conf["spark.pyspark.python"] == sys.executable
    assert conf["spark.pyspark.driver.python"] == sys.executable
    assert conf["spark.master"].startswith("local")
    assert conf["spark.ui.enabled"] == "false"
    assert "spark-sql-kafka-0-10" in conf["spark.jars"]
    # Broker jars never share Spark's classpath.
    assert "kafka_2.13" not in conf["spark.jars"]


def test_spark_conf_overrides_win():
    conf = spark_conf(master="spark://example:7077", conf={"spark.sql.shuffle.partitions": "64"})
    assert conf["spark.master"] == "spark://example:7077"
    assert conf["spark.sql.shuffle.partitions"] == "64"


def test_spark_conf_batches_arrow_by_rows_only_unless_told():
    """Any byte bound but exactly Int.MaxValue makes Spark re-measure each Arrow batch per
    row it feeds a Python step (~40% of the JVM's time in a Spark-engine upsert)."""
    assert spark_conf()["spark.sql.execution.arrow.maxBytesPerBatch"] == str(2**31 - 1)
    mine = spark_conf(conf={"spark.sql.execution.arrow.maxBytesPerBatch": "67108864"})
    assert mine["spark.sql.execution.arrow.maxBytesPerBatch"] == "67108864"

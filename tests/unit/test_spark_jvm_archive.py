"""What the environment adds to a local session's driver JVM: the class-data archive
(``$MOR_STREAMER_JVM_ARCHIVE``) and options (``$MOR_STREAMER_JVM_OPTIONS``)."""

from __future__ import annotations

import subprocess

import pytest

from streamer.spark import JVM_ARCHIVE_ENV, JVM_OPTIONS_ENV, class_archive, spark_conf


def test_a_local_session_starts_from_the_archive_when_it_exists(tmp_path, monkeypatch):
    archive = tmp_path / "classes.jsa"
    archive.write_bytes(b"x")
    monkeypatch.setenv(JVM_ARCHIVE_ENV, str(archive))
    options = spark_conf(master="local[2]", conf={"spark.driver.extraJavaOptions": "-XX:+UseSerialGC"},
                         with_kafka=False)["spark.driver.extraJavaOptions"]
    assert options.startswith("-XX:+UseSerialGC ")  # the pipeline's own options stay
    assert f"-XX:SharedArchiveFile={archive}" in options
    assert "-Xlog:cds=off" in options  # a refused archive prints nothing on stdout


def test_no_archive_option_without_the_file_or_on_a_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv(JVM_ARCHIVE_ENV, str(tmp_path / "missing.jsa"))
    assert class_archive() is None
    assert "SharedArchiveFile" not in spark_conf(master="local[1]", with_kafka=False)["spark.driver.extraJavaOptions"]
    (tmp_path / "missing.jsa").write_bytes(b"x")
    # executors and a cluster's driver run on other machines, which do not have the file
    conf = spark_conf(master="spark://h:7077", with_kafka=False)
    assert "SharedArchiveFile" not in conf["spark.driver.extraJavaOptions"]
    assert "SharedArchiveFile" not in conf["spark.executor.extraJavaOptions"]
    monkeypatch.delenv(JVM_ARCHIVE_ENV)
    assert class_archive() is None


def test_jvm_options_from_the_environment_go_to_a_local_driver_only(monkeypatch):
    monkeypatch.delenv(JVM_ARCHIVE_ENV, raising=False)
    monkeypatch.setenv(JVM_OPTIONS_ENV, "-XX:TieredStopAtLevel=1")
    local = spark_conf(master="local[1]", conf={"spark.driver.extraJavaOptions": "-Da=1"}, with_kafka=False)
    assert local["spark.driver.extraJavaOptions"] == "-Da=1 -XX:TieredStopAtLevel=1"
    assert "TieredStopAtLevel" not in local["spark.executor.extraJavaOptions"]
    cluster = spark_conf(master="spark://h:7077", conf={"spark.driver.extraJavaOptions": "-Da=1"}, with_kafka=False)
    assert cluster["spark.driver.extraJavaOptions"] == "-Da=1"
    monkeypatch.delenv(JVM_OPTIONS_ENV)
    assert spark_conf(master="local[1]", conf={"spark.driver.extraJavaOptions": "-Da=1"},
                      with_kafka=False)["spark.driver.extraJavaOptions"] == "-Da=1"


@pytest.mark.integration
def test_the_archive_make_test_built_fits_the_sessions_jvm(spark):
    """``-Xshare:on`` makes a JVM that cannot map the archive fail: the session's classpath
    and JDK are those the archive was made for, so every local session of the run uses it."""
    archive = class_archive()
    assert archive is not None, f"no class-data archive at ${JVM_ARCHIVE_ENV} (make test builds it)"
    jvm = spark._jvm
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in args
    assert "-XX:TieredStopAtLevel=1" in args  # conftest's $MOR_STREAMER_JVM_OPTIONS
    classpath = jvm.java.lang.System.getProperty("java.class.path")
    java = jvm.java.lang.System.getProperty("java.home") + "/bin/java"
    done = subprocess.run([java, "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", classpath, "-version"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr

"""The local session's Python worker daemon imports the installed pyspark, not Spark's zip."""

from __future__ import annotations

import os

import pytest

from streamer.spark import spark_conf
from streamer.spark_daemon import MODULE, mended_path


def _install(root) -> tuple[str, str]:
    """A fake site folder with a pyspark package holding Spark's ``python/lib`` zips."""
    site = root / "site-packages"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    for name in ("pyspark.zip", "py4j-0.10.9.9-src.zip"):
        (lib / name).write_bytes(b"")
    return str(site), str(lib)


def test_the_installed_packages_own_zip_is_dropped_and_nothing_else(tmp_path):
    site, lib = _install(tmp_path)
    other = str(tmp_path / "spark-4.0.0-bin" / "python" / "lib" / "pyspark.zip")
    path = [os.path.join(lib, "pyspark.zip"), os.path.join(lib, "py4j-0.10.9.9-src.zip"), other, site]
    assert mended_path(path) == path[1:]


def test_the_zip_stays_first_when_its_package_is_not_on_the_path(tmp_path):
    """Without the site folder on the path, the zip is the only pyspark there is."""
    _, lib = _install(tmp_path)
    path = [os.path.join(lib, "pyspark.zip"), "/usr/lib/python3/dist-packages"]
    assert mended_path(path) == path


def test_a_zip_whose_home_is_not_a_python_package_stays(tmp_path):
    """A Spark distribution's ``SPARK_HOME/python/lib/pyspark.zip``: nothing installed there."""
    lib = tmp_path / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (lib / "pyspark.zip").write_bytes(b"")
    path = [str(lib / "pyspark.zip"), str(tmp_path)]
    assert mended_path(path) == path


def test_local_masters_use_the_daemon_and_clusters_do_not():
    assert spark_conf("local[2]", with_kafka=False)["spark.python.daemon.module"] == MODULE
    assert "spark.python.daemon.module" not in spark_conf("spark://127.0.0.1:7077", with_kafka=False)


@pytest.mark.integration
def test_a_local_sessions_python_workers_import_the_installed_pyspark(spark):
    """Asked inside a Python task (mapInArrow): where its pyspark was imported from."""
    import pyarrow as pa

    def where(batches):
        import pyspark

        for _ in batches:
            yield pa.record_batch([pa.array([pyspark.__file__])], names=["file"])

    (found,) = {r.file for r in spark.range(1).mapInArrow(where, "file STRING").collect()}
    assert ".zip" not in found, found
    assert os.path.dirname(found) == os.path.dirname(__import__("pyspark").__file__)

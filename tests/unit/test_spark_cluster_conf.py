"""What a session pointed at a cluster is built with: the driver's address and our code shipped.

No JVM: the configuration and the zip are plain Python (the cluster itself is exercised by
tests/integration/test_spark_cluster.py).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from streamer.errors import ConfigError
from streamer.spark import (
    SHIP_PACKAGE_CONF,
    is_local_master,
    package_zip,
    ships_package,
    spark_conf,
)


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[4,3]"])
def test_local_masters_keep_the_driver_on_loopback_and_ship_nothing(master):
    conf = spark_conf(master=master, with_kafka=False)
    assert is_local_master(master)
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert not ships_package(conf)


@pytest.mark.parametrize("master", ["spark://10.0.0.1:7077", "yarn", "k8s://https://k8s:443", "local-cluster[2,1,1024]"])
def test_a_cluster_master_leaves_the_driver_address_to_spark_and_ships_the_code(master):
    conf = spark_conf(master=master, with_kafka=False)
    assert not is_local_master(master)
    # executors on other machines could not reach a driver that only listens on 127.0.0.1
    assert "spark.driver.host" not in conf and "spark.driver.bindAddress" not in conf
    assert ships_package(conf)
    pinned = spark_conf(master=master, conf={"spark.driver.host": "10.0.0.5"}, with_kafka=False)
    assert pinned["spark.driver.host"] == "10.0.0.5"


def test_shipping_can_be_forced_either_way_and_a_bad_value_is_refused():
    assert not ships_package(spark_conf(master="spark://h:7077", conf={SHIP_PACKAGE_CONF: "false"}, with_kafka=False))
    assert ships_package(spark_conf(master="local[2]", conf={SHIP_PACKAGE_CONF: "TRUE"}, with_kafka=False))
    with pytest.raises(ConfigError, match="shipPackage"):
        ships_package(spark_conf(master="local[2]", conf={SHIP_PACKAGE_CONF: "sometimes"}, with_kafka=False))


def test_the_package_zip_holds_our_code_and_data_and_is_reused_while_unchanged(tmp_path):
    first = package_zip(tmp_path)
    assert package_zip(tmp_path) == first  # same contents, same name: built once
    names = zipfile.ZipFile(first).namelist()
    for needed in ("streamer/__init__.py", "streamer/write/filegroup.py", "streamer/sources/__init__.py",
                   "streamer/transforms/__init__.py", "streamer/resources/log4j2.properties"):
        assert needed in names, needed
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no temp file left


def test_an_interpreter_imports_our_packages_from_the_zip_alone(tmp_path):
    """Python's isolated mode (-I: no site-packages .pth, so no editable install) plus the
    interpreter's own site-packages for the third-party packages: only the zip has our code."""
    shipped = package_zip(tmp_path)
    import pyarrow

    site_packages = str(Path(pyarrow.__file__).parent.parent)
    code = (f"import sys; sys.path.append({site_packages!r}); sys.path.insert(0, {str(shipped)!r}); "
            "import streamer.write.filegroup, streamer.sources.kafka, streamer.transforms; "
            "print(streamer.__file__, streamer.sources.kafka.__file__, streamer.transforms.__file__)")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert all(path.startswith(str(shipped)) for path in out.stdout.split()), out.stdout

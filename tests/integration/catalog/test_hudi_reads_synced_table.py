"""Apache Hudi's own Spark bundles (0.15 and 1.0, pyspark 3.5 in ``.venv-hudi``) find a table we
synced to the Hive metastore by name and reads it as the model: what Hudi's HiveSyncTool
would have registered is enough for Hudi's reader.

One Hive-enabled Hudi child per version for this module (the shared Hudi children of tests/hudi_jvm are
not Hive-enabled).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.catalog.synced_table import model, write_synced_table
from tests.support import hudi as oracle

pytestmark = [pytest.mark.integration, pytest.mark.hudi_jvm]


@pytest.fixture(scope="module", params=oracle.VERSIONS)
def hudi_hive(request, hive_metastore, tmp_path_factory) -> Iterator[oracle.HudiSpark]:
    missing = oracle.available()
    if missing:  # a set-up step, never a skip: `make hudi-env jars` makes it run
        pytest.fail(f"the Hudi JVM tier is not set up ({missing}); run `make hudi-env jars`")
    warehouse = tmp_path_factory.mktemp("hudi-hive-wh")
    session = oracle.HudiSpark(request.param, conf={
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.hive.metastore.uris": hive_metastore.uri,
        "spark.sql.warehouse.dir": str(warehouse),
    })
    session.start()
    try:
        yield session
    finally:
        session.stop()


def test_hudi_spark_sql_by_name_reads_our_synced_table(tmp_path, hive_metastore, hudi_hive):
    db = "hudibyname" + hudi_hive.version.replace(".", "")
    path = str(tmp_path / "trips")
    write_synced_table(path, hive_metastore.uri, db)
    expected = [model()[k] for k in sorted(model())]
    for name in ("trips", "trips_rt"):
        got = hudi_hive.sql(f"SELECT id, city, ts, fare, tip FROM {db}.{name} ORDER BY id", collect=True)
        assert got.to_pylist() == expected, name
    ro = hudi_hive.sql(f"SELECT id, fare FROM {db}.trips_ro ORDER BY id", collect=True).to_pylist()
    from streamer.read import Table

    assert ro == sorted(Table.open(path).read("read_optimized").select(["id", "fare"]).to_pylist(),
                        key=lambda r: r["id"])

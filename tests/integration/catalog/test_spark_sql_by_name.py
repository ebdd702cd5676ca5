"""``spark.sql("SELECT ... FROM db.trips")`` after a Hive sync, through the project's Spark
source (PySpark 4.x): the catalog table's provider is ``hudi``, which resolves to our Python
data source where Hudi's bundle is absent (``streamer.read.spark_source.register``).

Spark runs in one child process (Hive-enabled, bounded in time); the rows are compared,
value by value, with the model of what was written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.catalog.synced_table import model, write_synced_table

pytestmark = pytest.mark.integration

_CHILD = Path(__file__).with_name("_spark_sql_child.py")
_REPO = Path(__file__).resolve().parents[3]
_CHILD_TIMEOUT_S = 600  # a hang guard: generous, a loaded 2-core machine starts Spark slowly

def spark_sql(uri: str, warehouse: Path, queries: dict[str, str]) -> dict[str, list[dict]]:
    env = {**os.environ, "PYTHONPATH": str(_REPO)}
    proc = subprocess.run([sys.executable, str(_CHILD), uri, str(warehouse), json.dumps(queries)],
                          capture_output=True, text=True, timeout=_CHILD_TIMEOUT_S, env=env, cwd=warehouse)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"Spark child failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len("RESULT "):])


def test_spark_sql_by_name_returns_the_snapshot(tmp_path, hive_metastore):
    db = "sqlbyname"
    path = str(tmp_path / "trips")
    write_synced_table(path, hive_metastore.uri, db)
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    cols = "id, city, ts, fare, tip"
    out = spark_sql(hive_metastore.uri, warehouse, {
        "plain": f"SELECT {cols} FROM {db}.trips ORDER BY id",
        "rt": f"SELECT {cols} FROM {db}.trips_rt ORDER BY id",
        "ro": f"SELECT id, fare FROM {db}.trips_ro ORDER BY id",
        "where": f"SELECT id FROM {db}.trips WHERE city = 'sf' ORDER BY id",
        "meta": f"SELECT _hoodie_record_key, _hoodie_partition_path FROM {db}.trips ORDER BY _hoodie_record_key",
    })
    expected = [model()[k] for k in sorted(model())]
    assert out["plain"] == expected
    assert out["rt"] == expected
    # read-optimized: base files only - the update of "a" is in a log block, so the base
    # file's version shows; exactly what our own reader's read-optimized query returns
    from streamer.read import Table

    ro = Table.open(path).read("read_optimized").select(["id", "fare"]).to_pylist()
    assert out["ro"] == sorted(ro, key=lambda r: r["id"])
    assert {r["id"]: r["fare"] for r in out["ro"]}["a"] == 1.5
    assert out["where"] == [{"id": "a"}, {"id": "c"}]
    assert out["meta"] == [{"_hoodie_record_key": k, "_hoodie_partition_path": model()[k]["city"]}
                           for k in sorted(model())]

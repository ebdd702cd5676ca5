"""A pipeline's session registers the ``morhudi`` reader when a transform may read a table.

Registering it costs a Python process and ~1.5 CPU-s on a session's first registration
(Spark's lookup of installed Python data sources), so a pipeline whose transforms only
reshape the batch skips it. Here, in one fresh process (one JVM), as ``streamer run``
would: a rename-only pipeline writes a dimension table and leaves the reader
unregistered; then a pipeline whose Python transform joins each batch with that table
through ``spark.read.format("morhudi")`` gets it, and its rows carry the joined names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from streamer.read import Table
from tests.support.fixture_tables import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def join_dimension(df, dimension: str):
    """The Python transform under test: a lookup join with a lake table."""
    labels = df.sparkSession.read.format("morhudi").load(dimension).select("id", "label")
    return df.join(labels, "id", "left")


_CHILD = """
import sys
from streamer.cli import main
from streamer.spark import READER_REGISTERED_CONF
from pyspark.sql import SparkSession

assert main(["run", sys.argv[1]]) == 0
spark = SparkSession.getActiveSession()
print("after rename-only:", spark.conf.get(READER_REGISTERED_CONF, "false"), flush=True)
try:
    spark.read.format("morhudi").load(sys.argv[3]).count()
    print("morhudi: readable", flush=True)
except Exception as e:
    print("morhudi: refused", type(e).__name__, flush=True)
assert main(["run", sys.argv[2]]) == 0
print("after join:", spark.conf.get(READER_REGISTERED_CONF, "false"), flush=True)
"""


def _yaml(path, name: str, source, schema: str, target: str, transforms: list[dict]) -> str:
    path.write_text(json.dumps({"pipelines": [{
        "name": name, "engine": "local", "trigger": {"mode": "available_now"},
        "source": {"type": "files", "path": str(source), "format": "json", "schema": schema},
        "transforms": transforms, "target": {"path": target, "record_key": ["id"]},
        "spark": {"master": "local[1]"},
    }]}))
    return str(path)


def test_only_a_pipeline_that_may_read_tables_registers_the_reader(tmp_path):
    dims, facts = tmp_path / "dims", tmp_path / "facts"
    dims.mkdir()
    facts.mkdir()
    (dims / "1.json").write_text("".join(json.dumps({"id": f"k{i}", "name": f"n{i}"}) + "\n" for i in range(5)))
    (facts / "1.json").write_text("".join(json.dumps({"id": f"k{i}", "v": 10 * i}) + "\n" for i in range(3, 8)))
    dim_table, fact_table = str(tmp_path / "lake" / "dim"), str(tmp_path / "lake" / "fact")
    first = _yaml(tmp_path / "dim.yaml", "dim", dims, "id STRING, name STRING", dim_table,
                  [{"type": "rename", "columns": {"name": "label"}}])
    second = _yaml(tmp_path / "fact.yaml", "fact", facts, "id STRING, v BIGINT", fact_table,
                   [{"type": "python", "callable": f"{__name__}:join_dimension",
                     "options": {"dimension": dim_table}}])
    out = subprocess.run([sys.executable, "-c", _CHILD, first, second, dim_table], cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(("after", "morhudi"))]
    assert lines[0] == "after rename-only: false", out.stdout
    assert lines[1].startswith("morhudi: refused"), out.stdout
    assert lines[2] == "after join: true", out.stdout
    rows = Table.open(fact_table).read().sort_by("id").select(["id", "label"]).to_pylist()
    assert rows == [{"id": f"k{i}", "label": f"n{i}" if i < 5 else None} for i in range(3, 8)]

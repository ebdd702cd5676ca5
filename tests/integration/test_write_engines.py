"""Acceptance 5: the local and the Spark engine write the same table content.

The same batch sequence (upserts with in-batch duplicates and ``_hoodie_is_deleted``
rows, inserts, deletes) goes through ``engine="local"`` into one table and through
``engine="spark"`` (executors run the core functions via ``mapInArrow`` /
``applyInArrow``) into another, with a Spark DataFrame as input on the Spark side.
Both snapshots must be identical and equal to the model, through our reader and
hudi-rs.
"""

from __future__ import annotations

import pytest

from streamer.write import HudiWriter, TableConfig, WriteOptions
from tests.support.write_model import BatchGen, Model, canon, read_hudi_rs, read_ours

pytestmark = pytest.mark.integration

OPTS = WriteOptions(small_file_limit=20_000, max_file_size=30_000, default_record_size=100,
                    slice_bloom_num_entries=500)


def test_local_and_spark_engines_write_identical_tables(spark, tmp_path):
    gen, model = BatchGen(5), Model()
    batches = []
    for op in ["upsert", "upsert", "insert", "delete", "upsert"]:
        if op == "upsert":
            b = gen.upsert_batch(model, 60)
            model.upsert(b)
        elif op == "insert":
            b = gen.insert_batch(model, 40)
            model.insert(b)
        else:
            b = gen.delete_batch(model, 15)
            model.delete(b)
        batches.append((op, b))

    results = {}
    for engine in ("local", "spark"):
        path = str(tmp_path / engine)
        w = HudiWriter.create(path, TableConfig("eng", ("id",), ("city",), "ts"), options=OPTS)
        for op, b in batches:
            data = spark.createDataFrame(b) if engine == "spark" else b
            res = getattr(w, op)(data, engine=engine)
            assert res.engine == engine
        results[engine] = (canon(read_ours(path)), canon(read_hudi_rs(path)))

    expected = model.snapshot()
    assert results["local"][0] == results["spark"][0] == expected
    assert results["local"][1] == results["spark"][1] == expected


def test_auto_engine_collects_small_dataframes(spark, tmp_path):
    path = str(tmp_path / "auto")
    w = HudiWriter.create(path, TableConfig("auto", ("id",), ("city",), "ts"), options=OPTS)
    gen, model = BatchGen(9), Model()
    b = gen.upsert_batch(model, 30)
    model.upsert(b)
    res = w.upsert(spark.createDataFrame(b))
    assert res.engine == "local"
    assert canon(read_ours(path)) == model.snapshot()

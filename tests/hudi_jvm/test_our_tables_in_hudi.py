"""Acceptance 1 of the Hudi oracle issue: every kind of table we write reads identically
in Apache Hudi 0.15, Apache Hudi 1.0, hudi-rs and our reader, for all four query types
(snapshot, read-optimized, incremental, time travel).

Each test builds one table kind and sends all its queries to each Hudi session in one
batch. Rows are compared value for value (see ``compare.canon``).
"""

from __future__ import annotations

import pytest

from tests.hudi_jvm import tables
from tests.hudi_jvm.compare import assert_all_readers_agree

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance]

# hudi-rs 0.5.0 does not attach the logs of a pending compaction's new slice (fixed in
# apache/hudi-rs#501, unreleased): its snapshot of such a table is the table as of the plan.
HUDI_RS_GAPS = {"pending_compaction": ("snapshot", "incremental", "time_travel")}


@pytest.mark.parametrize("kind", sorted(tables.BUILDERS))
def test_table_kind_reads_identically(tmp_path, hudi_sessions, kind):
    path = str(tmp_path / kind)
    tables.BUILDERS[kind](path)
    assert_all_readers_agree(path, hudi_sessions, hudi_rs_skip=HUDI_RS_GAPS.get(kind, ()))


def test_key_generators_read_identically(tmp_path, hudi_sessions):
    for name, path in tables.key_generators(str(tmp_path)).items():
        assert_all_readers_agree(path, hudi_sessions, ignore=tables.KEYGEN_IGNORED.get(name, ()))


def test_hudi_reads_its_own_timestamp_keygen_table_the_same_way(tmp_path, hudi015, hudi10):
    """The evidence for KEYGEN_IGNORED: Hudi's reads of a table Hudi 0.15 wrote."""
    import pyarrow as pa

    path = str(tmp_path / "hudi_ts")
    rows = pa.table({"id": pa.array([1, 2], pa.int64()),
                     "ts": pa.array([1_700_000_000_000, 1_700_090_000_000], pa.int64())})
    hudi015.write(path, rows, {
        "hoodie.table.name": "d", "hoodie.datasource.write.table.type": "MERGE_ON_READ",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "ts",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
        "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
        "hoodie.keygen.timebased.timezone": "UTC", "hoodie.metadata.enable": "false",
    }, mode="overwrite")
    ro015 = hudi015.read(path, query="read_optimized").sort_by("id").column("ts").to_pylist()
    assert ro015 == ["2023/11/14", "2023/11/15"]
    ro10 = hudi10.read(path, query="read_optimized").sort_by("id").column("ts").to_pylist()
    assert ro10 == ["1700000000000", "1700090000000"]


@pytest.mark.integration
def test_spark_engine_table_reads_identically(tmp_path, hudi_sessions, spark):
    from tests.support import block_tables as tg

    path = str(tmp_path / "spark_engine")
    w = tg.create(path)
    gen, model = tg.Gen(5), tg.Model()
    for i in range(4):
        batch = gen.upserts(40) if i != 2 else gen.deletes(model, 10)
        df = spark.createDataFrame(batch.to_pylist(), schema="id long, city string, ts long, value string")
        (w.delete if i == 2 else w.upsert)(df, engine="spark")
        model.apply(deletes=batch) if i == 2 else model.apply(batch)
    assert tg.read_ours(path) == model.snapshot()
    assert_all_readers_agree(path, hudi_sessions)

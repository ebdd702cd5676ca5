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
HUDI_RS_GAPS = {"pending_compaction": ("snapshot", "incremental")}


@pytest.mark.parametrize("kind", sorted(tables.BUILDERS))
def test_table_kind_reads_identically(tmp_path, hudi_sessions, kind):
    path = str(tmp_path / kind)
    tables.BUILDERS[kind](path)
    assert_all_readers_agree(path, hudi_sessions, hudi_rs_skip=HUDI_RS_GAPS.get(kind, ()))


def test_key_generators_read_identically(tmp_path, hudi_sessions):
    for name, path in tables.key_generators(str(tmp_path)).items():
        assert_all_readers_agree(path, hudi_sessions), name


@pytest.mark.integration
def test_spark_engine_table_reads_identically(tmp_path, hudi_sessions, spark):
    from tests.unit.services import tablegen as tg

    path = str(tmp_path / "spark_engine")
    w = tg.create(path)
    gen, model = tg.Gen(5), tg.Model()
    for i in range(4):
        batch = gen.upserts(40) if i != 2 else gen.deletes(model, 10)
        df = spark.createDataFrame(batch.to_pandas())
        (w.delete if i == 2 else w.upsert)(df, engine="spark")
        model.apply(deletes=batch) if i == 2 else model.apply(batch)
    assert tg.read_ours(path) == model.snapshot()
    assert_all_readers_agree(path, hudi_sessions)

"""Acceptance 1 of the Hudi oracle issue: every kind of table we write reads as its model
in Apache Hudi 0.15, Apache Hudi 1.0, hudi-rs and our reader, for all four query types
(snapshot, read-optimized, incremental, time travel).

Each builder returns the model of what it wrote (a History of every commit); each test
sends all its queries to each Hudi session in one batch, and judges every reader - ours
included - by the model's answers (read-optimized: by the table's base files read as
plain Parquet). Rows are compared value for value (see ``compare.canon``). Where hudi-rs
has a registered gap (:mod:`tests.support.gaps`) it is asked those queries in a strict
xfail test of its own, which turns red when the gap closes.
"""

from __future__ import annotations

import pytest

from tests.hudi_jvm import tables
from tests.hudi_jvm.compare import (
    Expected,
    assert_hudi_rs_gap,
    assert_readers_match,
    standard_queries,
)
from tests.support.gaps import JVM_TIER_HUDI_RS_GAPS

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance]


@pytest.mark.parametrize("kind", sorted(tables.BUILDERS))
def test_table_kind_reads_as_its_model(tmp_path, hudi_sessions, kind):
    path = str(tmp_path / kind)
    history = tables.BUILDERS[kind](path)
    assert_readers_match(path, hudi_sessions, Expected.of(history),
                         hudi_rs_gaps=JVM_TIER_HUDI_RS_GAPS.get(kind, {}))


@pytest.mark.parametrize(("kind", "query_kind"), [
    pytest.param(kind, query_kind, marks=gap.xfail(), id=f"{kind}-{query_kind}-{gap.name}")
    for kind, by_query in sorted(JVM_TIER_HUDI_RS_GAPS.items())
    for query_kind, gap in sorted(by_query.items())
])
def test_hudi_rs_at_known_gap(tmp_path, kind, query_kind):
    """hudi-rs asked what a registered gap says it answers wrong (our reader first, plainly)."""
    path = str(tmp_path / kind)
    expected = Expected.of(tables.BUILDERS[kind](path))
    gap = JVM_TIER_HUDI_RS_GAPS[kind][query_kind]
    queries = [q for q in standard_queries(path) if q.kind == query_kind]
    assert queries, f"no {query_kind} query for {kind}"
    for q in queries:
        assert_hudi_rs_gap(path, expected, q, gap)


def test_key_generators_read_as_their_models(tmp_path, hudi_sessions):
    for name, (path, history) in tables.key_generators(str(tmp_path)).items():
        assert_readers_match(path, hudi_sessions, Expected.of(history),
                             hudi_ignore=tables.KEYGEN_IGNORED.get(name, ()))


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
def test_spark_engine_table_reads_as_its_model(tmp_path, hudi_sessions, spark):
    path = str(tmp_path / "spark_engine")
    assert_readers_match(path, hudi_sessions, Expected.of(tables.spark_engine(path, spark)))

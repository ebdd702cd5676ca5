"""Issue 29, acceptance 2: every kind of table the tier builds, written by us at table
version 8 and at 9, reads as its model in the Hudi releases that own those versions -
Hudi 1.0.2 (version 8) and 1.2.0 (8 and 9) - and in hudi-rs and our reader, for all four
query types. The builders are the version-6 tier's (:mod:`tests.hudi_jvm.tables`), run
inside :func:`tests.support.block_tables.at_version`.

Also here: the ``hoodie.properties`` a new v8/v9 table gets, audited key by key against
one Hudi 1.0.2 and 1.2.0 create themselves.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from streamer.config.policies import CompactionPolicy
from streamer.read import Table
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.services.handover import handover_to_hudi
from streamer.table.identity import IndexConfig, IndexType
from streamer.write import HudiWriter, TableConfig
from tests.hudi_jvm import tables
from tests.hudi_jvm.compare import Expected, Query, assert_readers_match, standard_queries
from tests.support import block_tables as tg
from tests.support.gaps import JVM_TIER_HUDI_RS_GAPS
from tests.support.hudi_options import HUDI_WRITE

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance]

#: The Hudi releases that read each version we write (1.0 knows nothing newer than 8).
READERS = {8: ("1.0", "1.2"), 9: ("1.2",)}


def _layout(path: str) -> tuple[int, int]:
    props = Table.open(path).properties
    return props.version, props.timeline_layout_version


#: Where a Hudi release answers differently from the model and from the other readers,
#: (kind, version, Hudi release) -> the query kind, asked of that release separately.
#: (Hudi 1.0.2 answered an incremental range reaching back into commits a clean had
#: removed files of with no rows while our archive left version 8 alone; with the commits
#: before the clean archived into the LSM history it answers as the others.)
HUDI_DIVERGENCES: dict[tuple[str, int, str], str] = {}


@pytest.mark.parametrize("version", sorted(READERS))
@pytest.mark.parametrize("kind", sorted(tables.BUILDERS))
def test_table_kind_at_version_reads_as_its_model(tmp_path, hudi_sessions, kind, version):
    path = str(tmp_path / kind)
    with tg.at_version(version):
        history = tables.BUILDERS[kind](path)
    assert _layout(path) == (version, 2)
    expected = Expected.of(history)
    diverging = {v: HUDI_DIVERGENCES[(kind, version, v)] for v in READERS[version]
                 if (kind, version, v) in HUDI_DIVERGENCES}
    sessions = {v: hudi_sessions[v] for v in READERS[version] if v not in diverging}
    assert_readers_match(path, sessions, expected, hudi_rs_gaps=JVM_TIER_HUDI_RS_GAPS.get(kind, {}))
    for v, query_kind in diverging.items():
        queries = [q for q in standard_queries(path) if q.kind != query_kind]
        assert_readers_match(path, {v: hudi_sessions[v]}, expected, queries, hudi_rs=False)
        _assert_divergence(hudi_sessions[v], path, [q for q in standard_queries(path) if q.kind == query_kind])


def _assert_divergence(session, path: str, queries: list[Query]) -> None:
    """The documented answer of :data:`HUDI_DIVERGENCES` (red when the release changes)."""
    assert queries
    for q in queries:
        got = session.read(path, query="incremental", begin=q.begin, end=q.end)
        assert got.num_rows == 0, f"Hudi {session.version} now answers {q.label()}: update HUDI_DIVERGENCES"


def _bucket_index(path: str) -> tables.History:
    cfg = TableConfig("svc", ("id",), ("city",), "ts", index=IndexConfig(IndexType.BUCKET, 4))
    rec = tables.Recorder(HudiWriter.create(path, tg.versioned(cfg), schema=tg.SCHEMA, options=tg.SMALL))
    gen = tg.Gen(11, key_space=80)
    for i in range(6):
        rec.step(gen, rows=30, delete=(i % 3 == 2))
    return rec.history


@pytest.mark.parametrize("version", sorted(READERS))
def test_bucket_index_table_at_version_reads_as_its_model(tmp_path, hudi_sessions, version):
    path = str(tmp_path / "bucket")
    with tg.at_version(version):
        history = _bucket_index(path)
    assert Table.open(path).properties.index_settings[0] == "bucket"
    assert_readers_match(path, {v: hudi_sessions[v] for v in READERS[version]}, Expected.of(history))


@pytest.mark.integration
@pytest.mark.parametrize("version", sorted(READERS))
def test_spark_engine_table_at_version_reads_as_its_model(tmp_path, hudi_sessions, spark, version):
    path = str(tmp_path / "spark_engine")
    with tg.at_version(version):
        history = tables.spark_engine(path, spark)
    assert _layout(path) == (version, 2)
    assert_readers_match(path, {v: hudi_sessions[v] for v in READERS[version]}, Expected.of(history))


def _check(path: str, model: tg.Model, sessions, step: str) -> None:
    """Snapshot (the model's rows) and read-optimized (the base files), every reader; no
    key twice through ours."""
    assert_readers_match(path, sessions, Expected.of_rows(model.snapshot(), tg.COLUMNS),
                         [Query("snapshot"), Query("read_optimized")])
    ours = tg.read_ours(path)
    assert len({(r["city"], r["id"]) for r in ours}) == len(ours), f"a key twice after {step}"


def _hudi_write(session, path, batch, model: tg.Model, *, delete=False, extra=None, mode="append"):
    opts = dict(HUDI_WRITE, **{"hoodie.index.type": "BLOOM"}, **(extra or {}))
    if delete:
        opts["hoodie.datasource.write.operation"] = "delete"
    session.write(path, batch, opts, mode=mode)
    model.apply(deletes=batch) if delete else model.apply(batch)


@pytest.mark.parametrize(("version", "creator"), [(9, "1.2"), (8, "1.0")])
def test_round_trip_hudi_creates_we_continue_hudi_services_we_continue(tmp_path, hudi_sessions, version, creator):
    """Acceptance 3: Hudi creates a v8/v9 table; we continue it; Hudi upserts, deletes,
    compacts and cleans; we continue - every reader equal to the model at each step."""
    sessions = {v: hudi_sessions[v] for v in READERS[version]}
    hudi = hudi_sessions[creator]
    path = str(tmp_path / "t")
    gen, model = tg.Gen(3), tg.Model()
    _hudi_write(hudi, path, gen.upserts(120, tag="create"), model, mode="overwrite")
    _hudi_write(hudi, path, gen.upserts(20, tag="h1"), model)
    assert _layout(path) == (version, 2), "Hudi did not create the version it was asked for"
    _check(path, model, sessions, f"Hudi {creator} created the table")

    w = HudiWriter.open(path, options=tg.SMALL)
    assert w.config.table_version == version
    for i in range(4):
        tg.step(w, gen, model, delete=(i == 2))
    _check(path, model, sessions, "our writes")

    handover_to_hudi(path)  # every key in a base file: Hudi's bloom index sees them all
    _hudi_write(hudi, path, gen.upserts(30, tag="h2"), model)
    _hudi_write(hudi, path, gen.deletes(model, 5), model, delete=True)
    _hudi_write(hudi, path, gen.upserts(30, tag="h3"), model, extra={
        "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "1",
        "hoodie.clean.automatic": "true", "hoodie.cleaner.commits.retained": "1",
    })
    actions = {i.action for i in Table.open(path).timeline.completed()}
    assert {"commit", "clean"} <= actions, actions  # Hudi's compaction and clean completed
    assert _layout(path) == (version, 2)
    _check(path, model, sessions, f"Hudi {creator} upserts, delete, compaction, clean")

    w = HudiWriter.open(path, options=tg.SMALL)
    for i in range(3):
        tg.step(w, gen, model, delete=(i == 1))
    _check(path, model, sessions, "our writes after Hudi's")


# --- acceptance 6: a delete followed by a lower-ordered re-insert ---------------------------
#: key -> value each table version must read (None: deleted), derived from the owning Hudi
#: release's source (streamer.table.payload_deletes says how): version 6 as Hudi 0.15's
#: DefaultHoodieRecordPayload orders delete blocks, versions 8/9 by event time as Hudi 1.x.
DIVERGENCE_EXPECTED = {
    6: {1: "reins-lower", 2: "reins-higher", 3: "upd300", 10: None},
    8: {1: None, 2: "reins-higher", 3: "upd300", 10: "base300"},
    9: {1: None, 2: "reins-higher", 3: "upd300", 10: "base300"},
}
#: The Hudi releases that own each version (their answers must equal ours), and the ones
#: that read a version differently: checked to answer what DIVERGENCE_EXPECTED of the
#: other rule says (red when a release changes its mind).
OWNERS = {6: ("0.15",), 8: ("1.0", "1.2"), 9: ("1.2",)}
OTHERS = {6: ("1.0", "1.2"), 8: (), 9: ()}


def _divergence_table(path: str, version: int) -> str:
    """Key 1 deleted (ordering 200), re-inserted at 150 then 120; key 2 re-inserted at 250;
    key 3 updated to 300 then deleted at 200; key 10's base record (300) deleted at 200.
    Returns the instant the incremental range starts after."""
    def rows(ids, ts, val):
        return pa.Table.from_pylist([{"id": i, "city": "sf", "ts": ts, "value": val} for i in ids], schema=tg.SCHEMA)

    with tg.at_version(version):
        w = tg.create(path)
    w.upsert(pa.concat_tables([rows(range(1, 40), 100, "base"), rows([10], 300, "base300")]).sort_by("id"))
    first = w.upsert(rows([1, 2, 3, 4], 200, "upd")).instant
    w.delete(rows([10], 200, None))
    w.delete(rows([1, 2], 200, None))
    w.upsert(rows([3], 300, "upd300"))
    w.delete(rows([3], 200, None))
    w.upsert(rows([1], 150, "reins-lower"))
    w.upsert(rows([1], 120, "reins-lower2"))
    w.upsert(rows([2], 250, "reins-higher"))
    return first


def _picked(table) -> dict[int, str]:
    rows = table.to_pylist() if hasattr(table, "to_pylist") else table
    return {r["id"]: r["value"] for r in rows if r["id"] in (1, 2, 3, 10)}


def _want(version: int) -> dict[int, str]:
    return {k: v for k, v in DIVERGENCE_EXPECTED[version].items() if v is not None}


@pytest.mark.parametrize("version", [6, 8, 9])
def test_delete_then_lower_reinsert_reads_as_the_owning_hudi_release(tmp_path, hudi_sessions, version):
    path = str(tmp_path / "t")
    first = _divergence_table(path, version)
    want = _want(version)
    other = _want(9 if version == 6 else 6)
    ours = Table.open(path)
    assert _picked(ours.read()) == want, "our snapshot"
    # the incremental range after the first update: the keys it changed, as the snapshot
    # (key 10's base record, when it survives, was written before the range)
    inc = {k: v for k, v in want.items() if v != "base300"}
    assert _picked(ours.read("incremental", begin=first)) == inc, "our incremental"
    for v in OWNERS[version]:
        assert _picked(hudi_sessions[v].read(path)) == want, f"Hudi {v} snapshot"
    for v in OTHERS[version]:
        assert _picked(hudi_sessions[v].read(path)) == other, f"Hudi {v} snapshot now agrees: update OTHERS"
    hudi_rs = _picked(tg.read_hudi_rs(path))
    assert hudi_rs == (want if version >= 8 else other), "hudi-rs"
    owner = "0.15" if version == 6 else "1.2"
    assert _picked(hudi_sessions[owner].read(path, query="incremental", begin=first)) == inc

    # our compaction writes the owner's answer into base files: every reader then agrees
    comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
    assert comp is not None and execute(Table.open(path), comp).status == "completed"
    assert _picked(Table.open(path).read()) == want
    assert _picked(tg.read_hudi_rs(path)) == want
    for v in (*OWNERS[version], *OTHERS[version]):
        assert _picked(hudi_sessions[v].read(path)) == want, f"Hudi {v} after our compaction"


#: Keys where a new table of ours differs from one Hudi 1.x's Spark writer creates, each
#: accepted by Hudi: the checksum and create schema follow the table's name and columns;
#: ``database.name`` and ``timeline.timezone`` as for version 6
#: (:func:`streamer.table.properties.new_table_properties`); the rest are Hudi writer
#: settings it records for itself (multiple base formats off, its Hive partition
#: extractor, the payload option it was given).
PROPERTY_DIFFERENCES = frozenset({
    "hoodie.table.checksum", "hoodie.table.create.schema", "hoodie.database.name",
    "hoodie.table.timeline.timezone", "hoodie.table.multiple.base.file.formats.enable",
    "hoodie.table.partition_extractor_class", "hoodie.table.legacy.payload.class",
})


@pytest.mark.parametrize(("version", "creator"), [(9, "1.2"), (8, "1.0")])
def test_new_table_properties_match_what_hudi_writes_at_the_version(tmp_path, hudi_sessions, version, creator):
    from streamer.table.properties import load_properties, new_table_properties

    path = str(tmp_path / "hudi")
    hudi_sessions[creator].write(path, tg.Gen(1).upserts(20),
                                 dict(HUDI_WRITE, **{"hoodie.metadata.enable": "false"}), mode="overwrite")
    theirs = load_properties(Table.open(path).fs, path).raw
    ours = new_table_properties("svc", record_key_fields=("id",), partition_fields=("city",),
                                precombine_field="ts", keygen_class="org.apache.hudi.keygen.SimpleKeyGenerator",
                                version=version).raw
    differ = {k: (theirs.get(k), ours.get(k)) for k in set(theirs) | set(ours)
              if theirs.get(k) != ours.get(k) and k not in PROPERTY_DIFFERENCES}
    assert not differ, f"hoodie.properties differs from Hudi {creator}'s at version {version}: {differ}"

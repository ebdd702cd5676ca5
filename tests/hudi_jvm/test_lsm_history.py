"""Versions 8 and 9 archived by us into Hudi 1.x's LSM history (streamer/services/
archive_history.py), as Hudi's own classes load it: Hudi 1.0.2 (version 8) and 1.2.0 (8 and
9) find every instant we archived, with its requested and completion time and its action,
and deserialise each one's metadata, before and after our archiver merged the history's
layers; the tables read as their model in every reader; and
Hudi's archiver continues on top of our history (merging our files into its layers) with
our writer and archive going on after it.

The tier's other tables of versions 8 and 9 (tests/hudi_jvm/test_table_versions.py,
``compacted_cleaned_archived``) are archived too, and read in all four query types."""

from __future__ import annotations

import os

import pytest

from streamer.config.policies import ArchivePolicy, CleanPolicy, CompactionPolicy
from streamer.read import Table
from streamer.services.archive import run_archive
from streamer.services.clean import run_clean
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.services.handover import handover_to_hudi
from streamer.table import lsm_history as h
from streamer.table.archived_commits import archived_write_extras
from streamer.write import HudiWriter
from tests.hudi_jvm.compare import (
    Expected,
    Query,
    assert_readers_match,
    canon,
    canon_rows,
    hudi_requests,
)
from tests.support import block_tables as tg
from tests.support.archived_writes import archived_writes
from tests.support.hudi import HudiOracleError
from tests.support.hudi_options import HUDI_WRITE

pytestmark = [pytest.mark.hudi_jvm, pytest.mark.conformance]

READERS = {8: ("1.0", "1.2"), 9: ("1.2",)}
POLICY = ArchivePolicy(min_commits=2, max_commits=3)
MERGING = ArchivePolicy(min_commits=2, max_commits=3, history_merge_batch=2)
CHECKS = [Query("snapshot"), Query("read_optimized")]
#: Hudi 1.2 writing on top: it compacts, cleans and archives inline, its history merged
#: into layer 1 once two files wait (its default waits for ten).
HUDI_ARCHIVING = {
    **HUDI_WRITE,
    "hoodie.index.type": "BLOOM",
    "hoodie.metadata.enable": "false",
    "hoodie.compact.inline": "true",
    "hoodie.compact.inline.max.delta.commits": "2",
    "hoodie.clean.automatic": "true",
    "hoodie.cleaner.commits.retained": "1",
    "hoodie.archive.automatic": "true",
    "hoodie.keep.min.commits": "2",
    "hoodie.keep.max.commits": "3",
    "hoodie.timeline.compaction.batch.size": "2",
}


def _services(path: str, w: HudiWriter, gen: tg.Gen, model: tg.Model, version: int,
              policy: ArchivePolicy = POLICY) -> list[str]:
    """A compaction, writes (one of them a delete), a clean and an archive; returns the
    instants archived."""
    with tg.at_version(version):
        comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
        assert execute(Table.open(path), comp).status == "completed"
        for i in range(3):
            tg.step(w, gen, model, delete=(i == 1))
        run_clean(Table.open(path), CleanPolicy(retain_commits=1))
        return run_archive(Table.open(path), policy).archived


def _history_rows(path: str) -> list[tuple[str, str, str]]:
    t = Table.open(path)
    rows = h.read_instants(t.fs, h.read_snapshot(t.fs, h.history_dir(path, t.properties)))
    return list(zip(*(rows.column(c).to_pylist() for c in ("instantTime", "completionTime", "action")),
                    strict=True))


def _loaded(session, path: str) -> list[tuple[str, str, str]]:
    got = session.archived_timeline(path)
    bad = [g for g in got if g["detail"].startswith("ERR")]
    assert not bad, f"Hudi {session.version} cannot read the metadata of {bad}"
    return [(g["requested"], g["completed"], g["action"]) for g in got]


@pytest.mark.parametrize("version", sorted(READERS))
def test_hudi_loads_every_instant_we_archived_with_its_metadata(tmp_path, hudi_sessions, version):
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model = tg.build(path, 6, deletes_every=3)
    archived = _services(path, w, gen, model, version)
    for _ in range(4):
        tg.step(w, gen, model)
    archived += _services(path, w, gen, model, version)  # a second snapshot, two files
    ours = _history_rows(path)
    assert [r[0] for r in ours] == sorted(archived) and len(archived) >= 10
    assert {r[2] for r in ours} >= {"deltacommit", "commit", "clean"}, ours
    for v in READERS[version]:
        assert _loaded(hudi_sessions[v], path) == ours, v
    # a third run, merging: the two oldest files become one of layer 1, as Hudi's archiver
    # merges its own (history_merge_batch 2, as hoodie.timeline.compaction.batch.size)
    for _ in range(4):
        tg.step(w, gen, model)
    archived += _services(path, w, gen, model, version, MERGING)
    t = Table.open(path)
    layers = sorted(f.layer for f in h.read_snapshot(t.fs, h.history_dir(path, t.properties)).files)
    assert layers == [0, 1], layers
    merged = _history_rows(path)
    assert [r[0] for r in merged] == sorted(archived) and merged[:len(ours)] == ours
    for v in READERS[version]:
        assert _loaded(hudi_sessions[v], path) == merged, v
    sessions = {v: hudi_sessions[v] for v in READERS[version]}
    assert_readers_match(path, sessions, Expected.of_rows(model.snapshot(), tg.COLUMNS), CHECKS)


def test_hudi_archives_on_top_of_our_history_and_we_go_on(tmp_path, hudi12):
    path = str(tmp_path / "t")
    with tg.at_version(9):
        w, gen, model = tg.build(path, 6, deletes_every=3)
    first = _services(path, w, gen, model, 9)
    assert first
    # as a user switching to a Hudi writer does: Hudi's bloom index sees base files only
    # (docs/hudi-interop.md), so every slice with logs is compacted first
    handover_to_hudi(path)
    before = h.read_snapshot(Table.open(path).fs, h.history_dir(path, Table.open(path).properties))
    for i in range(6):
        batch = gen.upserts(20, tag=f"h{i}")
        hudi12.write(path, batch, HUDI_ARCHIVING)
        model.apply(batch)
    t = Table.open(path)
    after = h.read_snapshot(t.fs, h.history_dir(path, t.properties))
    assert after.version > before.version, "Hudi's archiver did not run"
    assert any(f.name.endswith(("_1.parquet", "_2.parquet")) for f in after.files), \
        f"Hudi did not merge our files: {[f.name for f in after.files]}"
    loaded = _loaded(hudi12, path)
    assert set(first) <= {r[0] for r in loaded}
    # a pipeline's resume reads the history Hudi rewrote: every write Hudi's archived
    # timeline loads, newest first, with its extra metadata (Hudi's writes name a schema)
    writes = sorted((r[0] for r in loaded if r[2] in ("commit", "deltacommit", "replacecommit")), reverse=True)
    extras = list(archived_write_extras(t.fs, path, t.properties, t.timeline.layout_version))
    assert [ts for ts, _ in extras] == writes
    assert any(extra.get("schema") for _, extra in extras)
    sessions = {"1.2": hudi12}
    assert_readers_match(path, sessions, Expected.of_rows(model.snapshot(), tg.COLUMNS), CHECKS)
    # we go on: writes, services and an archive into the history Hudi rewrote
    w2 = HudiWriter.open(path, options=tg.SMALL)
    for i in range(4):
        tg.step(w2, gen, model, 15, delete=(i == 2))
    more = _services(path, w2, gen, model, 9)
    assert more
    loaded = _loaded(hudi12, path)
    assert set(first) | set(more) <= {r[0] for r in loaded}
    assert len({r[0] for r in loaded}) == len(loaded)
    assert not {i.timestamp for i in Table.open(path).timeline.instants} & {r[0] for r in loaded}
    assert_readers_match(path, sessions, Expected.of_rows(model.snapshot(), tg.COLUMNS), CHECKS)
    ours = tg.read_ours(path)
    assert len({(r["city"], r["id"]) for r in ours}) == len(ours), "a key twice"
    assert os.path.isdir(h.history_dir(path, Table.open(path).properties))


#: Hudi 0.15 reads a range holding archived writes from the active writes' files alone
#: (its fallback to a full scan is off by default); 1.x falls back by default.
FALLBACK = {"hoodie.datasource.read.incr.fallback.fulltablescan.enable": "true"}
#: Releases whose fallback scan reads a merge-on-read table's base files alone (the rows of
#: the range's writes there; no log merged). Hudi 1.2.0 merges each slice as we do.
BASE_FILES_ONLY = ("0.15", "1.0")


@pytest.mark.parametrize("version", [6, 8, 9])
def test_hudi_answers_incremental_ranges_over_archived_writes_as_we_do(tmp_path, hudi_sessions, version):
    """Ranges from the start, within the archive, across its edge and after it: ours and
    Hudi 1.2.0 equal the record of which write last wrote each key (tests/support/
    archived_writes.py); Hudi 0.15.0 and 1.0.2, where their scan runs, its base-file rows.
    Their scan runs when the range holds an archived write, and at layout 1 (their
    version-6 reader) whenever ``begin`` is older than the active timeline."""
    t = archived_writes(str(tmp_path / "t"), version)
    last, k = len(t.writes) - 1, len(t.archived)
    first_active = Table.open(t.path).timeline.first_instant
    ranges = [(None, last), (None, 1), (0, 2), (1, k + 1), (k - 1, last)]
    queries = []
    for after, upto in ranges:
        begin, end = t.bounds(after, upto)
        queries.append(Query("incremental", begin=begin or "000", end=end))

    def want(v: str, q: Query, after: int | None, upto: int) -> list[str]:
        scanned = (after is None or after < k - 1) if version > 6 else q.begin < first_active
        rows = t.base_files_only(after, upto) if v in BASE_FILES_ONLY and scanned else t.expected(after, upto)
        return canon_rows(rows, tg.COLUMNS)

    failures = []
    for q, (after, upto) in zip(queries, ranges, strict=True):
        if canon(Table.open(t.path).read("incremental", begin=q.begin, end=q.end), tg.COLUMNS) != want("", q, after, upto):
            failures.append(f"ours {q.label()}")
    for v in (("0.15", "1.2") if version == 6 else READERS[version]):  # 1.0 reads 6 as 0.15 does
        answers = hudi_sessions[v].read_many(hudi_requests(hudi_sessions[v], t.path, queries, FALLBACK))
        for q, (after, upto), got in zip(queries, ranges, answers, strict=True):
            expected = want(v, q, after, upto)
            if isinstance(got, HudiOracleError):
                failures.append(f"Hudi {v} {q.label()}: {got}")
            elif (got.num_rows or expected) and canon(got, tg.COLUMNS) != expected:  # no rows may mean no columns
                failures.append(f"Hudi {v} {q.label()}: {got.num_rows} rows, {len(expected)} expected")
    assert not failures, "\n".join(failures)

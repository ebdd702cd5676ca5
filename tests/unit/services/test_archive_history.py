"""Versions 8 and 9 archive into Hudi 1.x's LSM history (streamer/services/archive_history.py):
what moves, what readers see before and after, and a crash at every step of the move.
Hudi 1.0.2 and 1.2.0 reading it: tests/hudi_jvm/test_lsm_history.py."""

from __future__ import annotations

import os

import pytest

from streamer import faults
from streamer.config.policies import ArchivePolicy, CleanPolicy, CompactionPolicy
from streamer.errors import QueryError
from streamer.read import Table
from streamer.services.archive import run_archive
from streamer.services.clean import run_clean
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.table import lsm_history as h
from streamer.table.instant import State
from tests.support import block_tables as tg
from tests.support.archived_writes import archivable

POLICY = ArchivePolicy(min_commits=2, max_commits=3)


def _more_archivable(w, gen, model, path: str) -> None:
    """Four writes, a compaction and a clean: the next archive run has instants to move."""
    for _ in range(4):
        tg.step(w, gen, model)
    with tg.at_version(9):
        comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
        assert execute(Table.open(path), comp).status == "completed"
        run_clean(Table.open(path), CleanPolicy(retain_commits=1))


def _history(path: str) -> tuple[h.Snapshot, list[tuple[str, str, str]]]:
    t = Table.open(path)
    snap = h.read_snapshot(t.fs, h.history_dir(path, t.properties))
    rows = h.read_instants(t.fs, snap)
    return snap, list(zip(*(rows.column(c).to_pylist() for c in ("instantTime", "completionTime", "action")),
                          strict=True))


@pytest.mark.parametrize("version", [8, 9])
def test_old_instants_move_to_the_history_and_every_reader_reads_the_same(tmp_path, version):
    path = str(tmp_path / "t")
    w, gen, model = archivable(path, version)
    before = Table.open(path).timeline
    details = {i.timestamp: before.read_details(i, State.COMPLETED) for i in before.completed()}
    out = run_archive(Table.open(path), POLICY)
    assert out.archived and out.archive_file and out.skipped is None
    moved = [before.get(t) for t in out.archived]
    snap, rows = _history(path)
    assert [f.name for f in snap.files] == [os.path.basename(out.archive_file)]
    assert rows == [(i.timestamp, i.completion_time, i.completed_action) for i in moved]
    after = Table.open(path).timeline
    assert not {i.timestamp for i in after.instants} & set(out.archived)
    assert not [n for n in os.listdir(after.folder) if n.split(".")[0].split("_")[0] in out.archived]
    assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()
    with pytest.raises(QueryError, match="time travel to"):  # the clean's or the archive's reason
        Table.open(path).read(as_of=out.archived[0])
    assert Table.open(path)._has_archive()  # what names the archive as the reason without a clean
    # the row's metadata is the completed file's bytes (Hudi reads them as Avro)
    full = h.read_instants(Table.open(path).fs, snap, columns=("instantTime", "metadata"))
    assert full.column("metadata").to_pylist() == [details[i.timestamp] for i in moved]
    # the table goes on; a later run adds a snapshot listing both files
    for _ in range(5):
        tg.step(w, gen, model)
    with tg.at_version(version):
        comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
        assert execute(Table.open(path), comp).status == "completed"
        tg.step(w, gen, model)
        run_clean(Table.open(path), CleanPolicy(retain_commits=1))
    again = run_archive(Table.open(path), POLICY)
    assert again.archived and min(again.archived) > max(out.archived)
    snap, rows = _history(path)
    assert snap.version == 2 and len(snap.files) == 2
    assert [r[0] for r in rows] == sorted(out.archived + again.archived)
    assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()


def test_the_live_slices_log_writers_stay_active(tmp_path):
    """Layout 2 places a log file in its slice by its delta commit's completion time, which
    only the active timeline gives: such a delta commit is never archived."""
    path = str(tmp_path / "t")
    with tg.at_version(9):
        w, gen, model = tg.build(path, 8, deletes_every=3)  # no compaction: every log is live
    out = run_archive(Table.open(path), POLICY)
    t = Table.open(path)
    live = {lf.base_instant for s in t.fsview.latest_merged_slices() for lf in s.log_files}
    assert not live & set(out.archived)
    assert tg.read_ours(path) == model.snapshot()


def test_only_three_manifests_stay(tmp_path):
    path = str(tmp_path / "t")
    w, gen, model = archivable(path, 9)
    runs = 0
    for _ in range(5):
        if run_archive(Table.open(path), POLICY).archived:
            runs += 1
        _more_archivable(w, gen, model, path)
    assert runs >= 4
    folder = h.history_dir(path, Table.open(path).properties)
    versions = h.manifest_versions(Table.open(path).fs, folder)
    assert versions == list(range(runs - 2, runs + 1))
    assert len(h.read_snapshot(Table.open(path).fs, folder).files) == runs  # data files all stay
    assert tg.read_ours(path) == model.snapshot()


@pytest.mark.parametrize("earlier", [0, 1])
@pytest.mark.parametrize("at", ["history file written", "history manifest written", "history version written",
                                "archive removed pending files", "archive removed "])
def test_a_run_stopped_at_any_step_reads_the_same_and_the_next_run_finishes_it(tmp_path, at, earlier):
    """An injected error at each step of the move (the process dies there as far as the
    table can tell), into an empty history or after an ``earlier`` run: the table reads as
    before, every instant is in exactly one of the two places as far as a reader goes, and
    the next run completes the move without archiving anything twice."""
    path = str(tmp_path / "t")
    w, gen, model = archivable(path, 9)
    if earlier:
        assert run_archive(Table.open(path), POLICY).archived
        for _ in range(4):
            tg.step(w, gen, model)
        with tg.at_version(9):
            comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
            assert execute(Table.open(path), comp).status == "completed"
            tg.step(w, gen, model)
            run_clean(Table.open(path), CleanPolicy(retain_commits=1))
    _, held = _history(path)
    want = sorted([i.timestamp for i in Table.open(path).timeline.instants] + [r[0] for r in held])
    faults.fail_at(label=at)
    try:
        with pytest.raises(Exception):  # noqa: B017,PT011 - the injected OSError, however it surfaces
            run_archive(Table.open(path), POLICY)
    finally:
        faults.reset()
    assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()
    out = run_archive(Table.open(path), POLICY)
    snap, rows = _history(path)
    times = [r[0] for r in rows]
    assert len(times) == len(set(times))
    active = {i.timestamp for i in Table.open(path).timeline.instants}
    assert not active & set(times)
    assert sorted(active | set(times)) == want
    assert h.manifest_versions(Table.open(path).fs, snap.folder)[-1] == snap.version  # no orphan manifest
    # the move is published once a reader can find its manifest: by _version_, or (the first
    # manifest, no _version_ yet) by listing, as Hudi's readers fall back to; before that
    # the next run archives the same instants again (over an orphan manifest), after it it
    # only finishes the move
    unpublished = at == "history file written" or (earlier and at == "history manifest written")
    assert bool(out.archived) == unpublished
    assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()


MERGING = ArchivePolicy(min_commits=2, max_commits=3, history_merge_batch=2)


def test_the_history_merges_its_layers_as_hudis_archiver_does(tmp_path):
    """Two files waiting in a layer (``history_merge_batch: 2``) become one file of the next
    layer, up the layers; every archived instant stays in the history once, and the merged
    files leave the folder once no kept manifest lists them."""
    path = str(tmp_path / "t")
    w, gen, model = archivable(path, 9)
    archived: list[str] = []
    layers_seen = []
    for _ in range(4):
        out = run_archive(Table.open(path), MERGING)
        assert out.archived
        archived += out.archived
        snap, rows = _history(path)
        assert [r[0] for r in rows] == sorted(archived), "an archived instant lost or twice"
        layers_seen.append(sorted(f.layer for f in snap.files))
        _more_archivable(w, gen, model, path)
    # run 2 merges the two layer-0 files; run 4 merges two layer-0 files, then the two layer-1 ones
    assert layers_seen == [[0], [1], [0, 1], [2]]
    (top,) = snap.files
    assert top.name == f"{min(archived)}_{max(archived)}_2.parquet"
    full = h.read_instants(Table.open(path).fs, snap, columns=tuple(h.SCHEMA.names))
    assert full.column("metadata").null_count < full.num_rows and set(full.column("version").to_pylist()) == {1}
    on_disk = sorted(n for n in os.listdir(snap.folder) if h.FILE_PATTERN.match(n))
    kept = set()
    for v in h.manifest_versions(Table.open(path).fs, snap.folder):
        kept |= {f.name for f in h._manifest_files(Table.open(path).fs, snap.folder, v)}
    assert set(on_disk) == kept, "a data file no kept manifest lists is left"
    assert len(h.manifest_versions(Table.open(path).fs, snap.folder)) <= h.MANIFESTS_KEPT + 2
    assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()


@pytest.mark.parametrize("at", ["history file written", "history manifest written", "history version written",
                                "history manifests cleaned"])
def test_a_merge_stopped_at_any_step_reads_the_same_and_the_next_run_merges(tmp_path, at):
    path = str(tmp_path / "t")
    w, gen, model = archivable(path, 9)
    first = run_archive(Table.open(path), MERGING).archived
    _more_archivable(w, gen, model, path)
    nth = 1 if at == "history manifests cleaned" else 2  # the 2nd: the merge's, after the archive's own
    faults.fail_at(nth, label=at)
    try:
        with pytest.raises(Exception):  # noqa: B017,PT011 - the injected OSError, however it surfaces
            run_archive(Table.open(path), MERGING)
    finally:
        faults.reset()
    _, rows = _history(path)
    held = [r[0] for r in rows]
    active = {i.timestamp for i in Table.open(path).timeline.instants}
    assert set(first) <= set(held) and len(held) == len(set(held)) and not active & set(held)
    assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()
    _more_archivable(w, gen, model, path)
    assert run_archive(Table.open(path), MERGING).archived
    snap, rows = _history(path)
    held = [r[0] for r in rows]
    assert len(held) == len(set(held)) and set(first) <= set(held)
    # the stopped merge's two files and the new run's one: the oldest two merged now
    assert sorted(f.layer for f in snap.files) == [0, 1], [f.name for f in snap.files]
    (merged,) = [f for f in snap.files if f.layer == 1]
    assert merged.first == min(first)
    assert tg.read_ours(path) == tg.read_hudi_rs(path) == model.snapshot()

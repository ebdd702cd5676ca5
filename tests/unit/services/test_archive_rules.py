"""What the archive and the cleaner leave alone on a table other engines share: Hudi's
savepoints, the metadata table a Hudi writer keeps, and a replacecommit whose replaced
file groups still have files (streamer/services/archive.py ``archive_bound``); and the
replaced groups' way out: a compaction planned before still runs, the cleaner deletes them.

Each answer is fixed before the service runs: the instants on the timeline, the files a
slice reads, the rows the model holds."""

from __future__ import annotations

import datetime as dt
import os

import pytest

from streamer.config.policies import ArchivePolicy, CleanPolicy, CompactionPolicy
from streamer.read import Table
from streamer.services.archive import run_archive
from streamer.services.clean import run_clean
from streamer.services.compaction import schedule_compaction
from streamer.services.executor import execute
from streamer.table.instant import format_instant_time, parse_instant_time
from tests.support import block_tables as tg
from tests.support.archived_writes import archivable
from tests.support.hudi_actions import metadata_table, replace_partition, savepoint

POLICY = ArchivePolicy(min_commits=2, max_commits=3)


@pytest.mark.parametrize("version", [6, 9])
def test_a_savepoint_leaves_its_commit_a_completed_write(tmp_path, version):
    path = str(tmp_path / "t")
    _, _, model = archivable(path, version)
    writes = [i.timestamp for i in Table.open(path).timeline.completed_writes()]
    for ts in (writes[1], writes[-1]):
        savepoint(path, ts)
    t = Table.open(path)
    assert [i.timestamp for i in t.timeline.completed_writes()] == writes
    assert [i.timestamp for i in t.timeline.savepoints] == [writes[1], writes[-1]]
    assert tg.canon(t.read()) == model.snapshot()


@pytest.mark.parametrize("version", [6, 9])
def test_the_archive_stops_at_the_firstsavepoint(tmp_path, version):
    path = str(tmp_path / "t")
    _, _, model = archivable(path, version)
    saved = Table.open(path).timeline.completed_writes()[2].timestamp
    names = savepoint(path, saved)
    out = run_archive(Table.open(path), POLICY)
    assert out.archived and max(out.archived) < saved and out.bound == saved
    t = Table.open(path)
    assert t.timeline.is_completed(saved) and t.timeline.first_instant <= saved
    assert set(names) <= set(os.listdir(t.timeline.folder))
    assert tg.canon(t.read()) == model.snapshot()


@pytest.mark.parametrize("version", [6, 9])
def test_the_cleaner_keeps_the_files_a_savepoint_reads(tmp_path, version):
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model = tg.build(path, 3)
        saved = Table.open(path).timeline.completed_writes()[-1].timestamp
        savepoint(path, saved)
        kept = {p for s in Table.open(path).fsview.latest_merged_slices(as_of=saved) for p in s.paths}
        comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
        assert execute(Table.open(path), comp).status == "completed"
        for _ in range(3):
            tg.step(w, gen, model)
        out = run_clean(Table.open(path), CleanPolicy(retain_commits=1))
    assert kept and all(os.path.exists(p) for p in kept), sorted(p for p in kept if not os.path.exists(p))
    assert out.files_deleted == 0  # every older slice is the savepoint's here
    assert tg.canon(Table.open(path).read()) == model.snapshot()


@pytest.mark.parametrize("version", [6, 9])
def test_the_archive_stops_at_the_metadata_tables_last_compaction(tmp_path, version):
    control, path, never = (str(tmp_path / name) for name in ("control", "t", "never"))
    archivable(control, version)
    assert run_archive(Table.open(control), POLICY).archived, "precondition: the same table without one archives"
    archivable(path, version)
    compacted = Table.open(path).timeline.completed_writes()[2].timestamp
    metadata_table(path, compacted)
    out = run_archive(Table.open(path), POLICY)
    assert out.archived and max(out.archived) <= compacted < min(i.timestamp for i in Table.open(path).timeline)
    assert os.path.isdir(os.path.join(path, ".hoodie", "metadata"))  # an archive commits nothing: kept
    archivable(never, version)
    metadata_table(never, None)
    assert run_archive(Table.open(never), POLICY).archived == []


def _replaced_then_written(path: str, version: int) -> tuple[tg.Model, str, set[tuple[str, str]]]:
    """A Hudi ``delete_partition`` of ``oslo``, then seven writes elsewhere with a
    compaction among them; returns the model, the replacecommit and the replaced groups."""
    with tg.at_version(version):
        _, gen, model = tg.build(path, 2)
        replace, part = replace_partition(path, "oslo")
        model.rows = {k: v for k, v in model.rows.items() if k[0] != "oslo"}
        assert tg.canon(Table.open(path).read()) == model.snapshot(), "precondition: the partition reads empty"
        w = tg.open_writer(path)
        for i in range(7):
            batch = gen.upserts(12)
            batch = batch.filter([c != "oslo" for c in batch.column("city").to_pylist()])
            w.upsert(batch)
            model.apply(batch)
            if i == 3:
                comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
                assert execute(Table.open(path), comp).status == "completed"
    replaced = {g for g in Table.open(path).fsview.replaced_file_groups() if g[0] == part}
    return model, replace, replaced


def _on_storage(path: str) -> set[tuple[str, str]]:
    return {(g.partition_path, g.file_id) for g in Table.open(path).fsview.file_groups()}


@pytest.mark.parametrize("version", [6, 9])
def test_a_replacecommit_stays_while_its_replaced_groups_have_files(tmp_path, version):
    path = str(tmp_path / "t")
    model, replace, replaced = _replaced_then_written(path, version)
    assert replaced and replaced <= _on_storage(path), "precondition: the replaced groups' files are there"
    out = run_archive(Table.open(path), POLICY)
    assert out.archived and replace not in out.archived and out.bound == replace
    assert Table.open(path).timeline.is_completed(replace)
    assert tg.canon(Table.open(path).read()) == tg.read_hudi_rs(path) == model.snapshot()


@pytest.mark.parametrize("version", [6, 9])
def test_the_cleaner_deletes_replaced_groups_then_the_archive_moves_their_replacecommit(tmp_path, version):
    path = str(tmp_path / "t")
    model, replace, replaced = _replaced_then_written(path, version)
    with tg.at_version(version):
        run_clean(Table.open(path), CleanPolicy(retain_commits=1))
    assert replaced and not replaced & _on_storage(path)
    out = run_archive(Table.open(path), POLICY)
    assert replace in out.archived
    assert tg.canon(Table.open(path).read()) == tg.read_hudi_rs(path) == model.snapshot()


@pytest.mark.parametrize("version", [6, 9])
def test_a_compaction_planned_before_a_replacecommit_still_runs(tmp_path, version):
    path = str(tmp_path / "t")
    with tg.at_version(version):
        w, gen, model = tg.build(path, 3)
        comp = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
        replace, part = replace_partition(path, "oslo")
        model.rows = {k: v for k, v in model.rows.items() if k[0] != "oslo"}
        replaced = Table.open(path).fsview.replaced_file_groups()
        assert execute(Table.open(path), comp).status == "completed"
        assert tg.canon(Table.open(path).read()) == model.snapshot()
        for i in range(5):
            tg.step(w, gen, model)
            if i == 2:  # the slices based at the first compaction would hold the archive there
                again = schedule_compaction(Table.open(path), CompactionPolicy(), force=True)
                assert execute(Table.open(path), again).status == "completed"
        run_clean(Table.open(path), CleanPolicy(retain_commits=1))
    assert replaced and not replaced & _on_storage(path), "the replaced groups, compacted or not, are cleaned"
    assert replace in run_archive(Table.open(path), POLICY).archived
    assert tg.canon(Table.open(path).read()) == tg.read_hudi_rs(path) == model.snapshot()


def test_a_new_instant_comes_after_a_savepoints_completion(tmp_path):
    """Version 9: the next instant is later than every time the timeline holds, a
    savepoint's completion time included (it completes after the commit it keeps)."""
    path = str(tmp_path / "t")
    with tg.at_version(9):
        w, gen, model = tg.build(path, 2)
        last = Table.open(path).timeline.completed_writes()[-1]
        later = format_instant_time(parse_instant_time(last.completion_time) + dt.timedelta(hours=1))
        folder = Table.open(path).timeline.folder
        for name in (f"{last.timestamp}.savepoint.inflight", f"{last.timestamp}_{later}.savepoint"):
            with open(os.path.join(folder, name), "wb"):
                pass
        tg.step(w, gen, model)
    assert Table.open(path).timeline.completed_writes()[-1].timestamp > later

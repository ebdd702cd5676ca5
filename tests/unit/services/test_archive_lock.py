"""The archive removes instants from the active timeline only while holding the writers'
lock (streamer/services/archive.py): a writer lists the timeline under that lock and then
reads the commit metadata of recent writes, so an instant archived in between failed its
commit with "timeline file missing" (the clock campaign's interleaved writer saw it)."""

from __future__ import annotations

import threading
import time

import pytest

from streamer.config.policies import ArchivePolicy
from streamer.read import Table
from streamer.services.archive import run_archive
from streamer.write.lock import WriterLock
from tests.support.archived_writes import archivable

POLICY = ArchivePolicy(min_commits=2, max_commits=3)


@pytest.mark.parametrize("version", [6, 9])
def test_a_busy_writers_lock_keeps_every_instant_on_the_active_timeline(tmp_path, version):
    path = str(tmp_path / "t")
    archivable(path, version)
    before = [i.timestamp for i in Table.open(path).timeline.instants]
    table = Table.open(path)
    with WriterLock(table.fs, path, purpose="a writer mid-commit"):
        out = run_archive(table, POLICY, lock_expiry_s=0.25)  # waits 1 s for the writers' lock
        assert out.archived == [] and out.archive_file is None
        assert [i.timestamp for i in Table.open(path).timeline.instants] == before
    out = run_archive(Table.open(path), POLICY)  # the lock free: the same run archives
    assert out.archived and set(out.archived) <= set(before)


@pytest.mark.parametrize("version", [6, 9])
def test_the_archive_waits_for_the_writer_then_moves_the_instants(tmp_path, version):
    path = str(tmp_path / "t")
    archivable(path, version)
    table = Table.open(path)
    lock = WriterLock(table.fs, path, purpose="a writer mid-commit").acquire()
    committed = threading.Event()

    def finish_commit() -> None:
        time.sleep(0.5)  # the archive starts meanwhile and must wait
        committed.set()
        lock.release()

    t = threading.Thread(target=finish_commit)
    t.start()
    out = run_archive(table, POLICY, lock_expiry_s=5.0)
    moved_after_the_commit = committed.is_set()
    t.join(10)
    assert moved_after_the_commit, "the archive moved instants while a writer held the lock"
    assert out.archived
    assert not {i.timestamp for i in Table.open(path).timeline.instants} & set(out.archived)

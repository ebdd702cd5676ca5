"""Table version 6: an archive stopped between writing its archive file and its last delete
is finished by the next run, not archived twice (versions 8 and 9:
tests/unit/services/test_archive_history.py)."""

from __future__ import annotations

import collections

import pytest

from streamer import faults
from streamer.config.policies import ArchivePolicy
from streamer.read import Table
from streamer.services.archive import run_archive
from streamer.table.archived_commits import archived_write_extras
from tests.support import block_tables as tg
from tests.support.archived_writes import archivable

POLICY = ArchivePolicy(min_commits=2, max_commits=3)


@pytest.mark.parametrize("removed", [0, 1, 3])
def test_the_next_run_finishes_a_stopped_move_and_archives_nothing_twice(tmp_path, removed):
    path = str(tmp_path / "t")
    w, gen, model = archivable(path, 6)
    before = [i.timestamp for i in Table.open(path).timeline.completed()]
    faults.fail_at(max(removed, 1), label="archive " + ("written" if removed == 0 else "removed"))
    try:
        with pytest.raises(OSError):
            run_archive(Table.open(path), POLICY)
    finally:
        faults.reset()
    left = [i.timestamp for i in Table.open(path).timeline.completed()]
    moved = [ts for ts in before if ts not in left]
    assert len(moved) == removed, "precondition: the run stopped after that many instants"
    for _ in range(3):
        tg.step(w, gen, model)
    out = run_archive(Table.open(path), POLICY)
    t = Table.open(path)
    archived = [ts for ts, _ in archived_write_extras(t.fs, path, t.properties, 1)]
    assert not [ts for ts, n in collections.Counter(archived).items() if n > 1], "an instant archived twice"
    assert not set(out.archived) & set(left), "the interrupted run's instants were archived again"
    assert not {i.timestamp for i in t.timeline.instants} & set(archived)
    assert tg.canon(t.read()) == model.snapshot()

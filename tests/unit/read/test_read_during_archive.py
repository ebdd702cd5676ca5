"""A query whose handle listed the timeline before an archiver moved instants still
answers (streamer/read/table.py plans again from a fresh listing): a read takes no lock,
and an async archive may run at any moment. Before, the read failed with "timeline file
missing" naming the moved instant. The expected rows come from the test's own record of
which write last wrote each key (tests/support/archived_writes.py), not from a reader."""

from __future__ import annotations

import os

import pytest

from streamer.errors import MissingFileError
from streamer.read import Table
from tests.support import block_tables as tg
from tests.support.archived_writes import archived_writes


def _listed(path: str) -> Table:
    t = Table.open(path)
    assert t.timeline.instants  # listed now, before the archive
    return t


@pytest.mark.parametrize("version", [6, 9])
def test_a_handle_listed_before_an_archive_still_reads_every_row(tmp_path, version):
    path = str(tmp_path / "t")
    handles: list[Table] = []
    aw = archived_writes(path, version, before_archive=lambda: handles.extend([_listed(path), _listed(path)]))
    snapshot_handle, incremental_handle = handles
    assert set(aw.archived) <= {i.timestamp for i in snapshot_handle.timeline.instants}  # stale
    last = len(aw.writes) - 1
    assert tg.canon(snapshot_handle.read()) == aw.expected(None, last)
    begin, end = aw.bounds(0, len(aw.archived) + 1)  # across the archive's edge
    got = tg.canon(incremental_handle.read("incremental", begin=begin, end=end))
    assert got == aw.expected(0, len(aw.archived) + 1)


def test_a_missing_data_file_is_still_reported_after_planning_again(tmp_path):
    """Planning again is for moved instants only: a file a completed write put into a live
    slice, missing, is damage, and the read names it (not a short answer)."""
    path = str(tmp_path / "t")
    handles: list[Table] = []
    aw = archived_writes(path, 6, before_archive=lambda: handles.append(_listed(path)))
    fresh = Table.open(path)
    last = fresh.timeline.completed_writes()[-1]
    assert last.timestamp == aw.writes[-1]
    victim = next(s.path for s in fresh.fsview.commit_metadata(last).write_stats() if s.path)
    os.remove(os.path.join(path, victim))
    with pytest.raises(MissingFileError, match=os.path.basename(victim)):
        handles[0].read()

"""Incremental ranges that reach back past the active timeline read the rows of the
archived writes too (streamer/read/incremental.py), at table versions 6, 8 and 9.

Before, such a range read only the files the active writes named: a range from the
start of an archived table returned 32 of its 121 rows, with no error. The expected
answers come from the test's own record of which write last wrote each key, not from a
reader (tests/support/archived_writes.py). Hudi 1.x's answers: tests/hudi_jvm/test_lsm_history.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamer.errors import CorruptDataError
from streamer.read import Table
from streamer.table import lsm_history as h
from streamer.table.instant import format_instant_time, parse_instant_time
from tests.support import block_tables as tg
from tests.support.archived_writes import archived_writes


@pytest.mark.parametrize("version", [6, 8, 9])
def test_a_range_reaching_past_the_active_timeline_reads_the_archived_writes_rows(tmp_path, version):
    t = archived_writes(str(tmp_path / "t"), version)
    last, k = len(t.writes) - 1, len(t.archived)
    # from the start; within the archive; across its edge; from its edge to the end
    for after, upto in [(None, last), (None, 1), (0, 2), (1, k + 1), (k - 1, last)]:
        begin, end = t.bounds(after, upto)
        got = tg.canon(Table.open(t.path).read("incremental", begin=begin, end=end))
        assert got == t.expected(after, upto), (version, after, upto)
    assert tg.canon(Table.open(t.path).read("incremental")) == tg.read_ours(t.path)


def test_a_range_of_active_writes_still_reads_only_their_files(tmp_path):
    """No archived write in the range: the files its writes name, each key as the range
    left it (a key written again after the range keeps the range's value)."""
    t = archived_writes(str(tmp_path / "t"), 6)
    after, upto = len(t.archived), len(t.writes) - 2
    begin, end = t.bounds(after, upto)
    rows = Table.open(t.path).read("incremental", begin=begin, end=end)
    assert set(rows.column("_hoodie_commit_time").to_pylist()) <= set(t.writes[after + 1:upto + 1])
    assert len(rows) > 0


def test_a_range_reads_the_history_from_a_day_before_its_begin(tmp_path):
    """Layout 2: history files of writes requested over a day before ``begin`` are not read
    (Hudi 1.x's completion-time view loads the same); an older bound reads them."""
    t = archived_writes(str(tmp_path / "t"), 9)
    table = Table.open(t.path)
    [old] = h.read_snapshot(table.fs, h.history_dir(t.path, table.properties)).files
    (tmp_path / "t" / ".hoodie" / "timeline" / "history" / old.name).write_bytes(b"not parquet")
    later = format_instant_time(parse_instant_time(t.writes[-1]) + timedelta(days=1, minutes=1))
    assert Table.open(t.path).read("incremental", begin=later).num_rows == 0
    with pytest.raises(CorruptDataError, match=old.name):
        Table.open(t.path).read("incremental", begin=t.writes[0])
